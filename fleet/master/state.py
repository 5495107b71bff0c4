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
    from fleet.master.services.sweeper import Sweeper


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
        started_at: Unix time the app started.
    """

    settings: Settings
    tokens: TokenTable
    backend: Backend | None = None
    sweeper: Sweeper | None = None
    metrics: MasterMetrics | None = None
    entries: EntryCache = field(default_factory=EntryCache)
    events: EventHub | None = None
    started_at: float = field(default_factory=time.time)


def master_state(request: Request) -> MasterState:
    """The state of the app serving ``request``."""
    state: MasterState = request.app.state.fleet
    return state


async def backend_dependency(request: Request) -> Backend:
    """The app's backend (FastAPI dependency; async so it runs on the event loop)."""
    return get_backend(request)


def get_backend(request: Request) -> Backend:
    """The app's backend."""
    backend = master_state(request).backend
    if backend is None:  # pragma: no cover - only outside the lifespan
        raise RuntimeError("the master's backend is not connected (lifespan not started)")
    return backend
