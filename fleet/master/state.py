"""The per-app state of a master (kept on ``app.state.fleet``, never in globals)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fastapi import Request

from fleet.backends.base import Backend
from fleet.master.http.auth import TokenTable
from fleet.master.services.entry_cache import EntryCache
from fleet.settings import Settings

if TYPE_CHECKING:
    from fleet.master.services.event_hub import EventHub
    from fleet.master.services.metrics import MasterMetrics
    from fleet.master.services.readiness import Readiness
    from fleet.master.services.shared_views import SharedWorkerViews
    from fleet.master.services.sweeper import Sweeper
    from fleet.master.services.waits import Waits


@dataclass
class MasterState:
    """Everything one master app holds.

    Attributes:
        settings: The settings the app was created with.
        tokens: The known tokens.
        backend: The connected backend (set by the lifespan).
        sweeper: The background sweeper (None when disabled).
        metrics: The Prometheus exporter (its own registry).
        entries: Batch types' catalog entries as the submit routes reuse them.
        events: The hub every event stream shares (set by the lifespan).
        views: The read of every worker's view that ``GET /workers``, ``GET
            /automations`` and the event hub share (set by the lifespan).
        readiness: ``/readyz``'s cached probe of the backend (set by the lifespan).
        waits: The shared pollers of ``?wait=`` (set by the lifespan).
        started_at: Unix time the app started.
    """

    settings: Settings
    tokens: TokenTable
    backend: Backend | None = None
    sweeper: Sweeper | None = None
    metrics: MasterMetrics | None = None
    entries: EntryCache = field(default_factory=EntryCache)
    events: EventHub | None = None
    views: SharedWorkerViews | None = None
    readiness: Readiness | None = None
    waits: Waits | None = None
    started_at: float = field(default_factory=time.time)


def master_state(request: Request) -> MasterState:
    """The state of the app serving ``request``."""
    state: MasterState = request.app.state.fleet
    return state


async def backend_dependency(request: Request) -> Backend:
    """The app's backend (FastAPI dependency; async so it runs on the event loop)."""
    return get_backend(request)


def shared_views(request: Request) -> SharedWorkerViews:
    """The app's shared read of the worker views."""
    views = master_state(request).views
    if views is None:  # pragma: no cover - only outside the lifespan
        raise RuntimeError("the master's worker views are not set up (lifespan not started)")
    return views


def views_changed(request: Request) -> None:
    """Tell the shared read of the worker views that this request just changed what
    a view shows (a forgotten or drained worker, a new config generation, a deleted
    type): the next reader waits for a fresh read, so the change shows at once."""
    views = master_state(request).views
    if views is not None:
        views.invalidate()


def get_backend(request: Request) -> Backend:
    """The app's backend."""
    backend = master_state(request).backend
    if backend is None:  # pragma: no cover - only outside the lifespan
        raise RuntimeError("the master's backend is not connected (lifespan not started)")
    return backend
