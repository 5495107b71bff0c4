"""``GET /api/v1/events``: server-sent events for live views.

Every stream of a master is fed by one :class:`~fleet.master.services.event_hub.EventHub`
(one backend subscription, one poller). A client sees the backend's event
topics of every catalogued type (``<type>.emit``, ``config.<type>``, ``control.<type>``,
``cancel.<type>``, ``worker.<type>``) and, every ``interval`` seconds, sends
the queue depths of every batch type. When new types appear in the catalog
the subscription is renewed to cover them. ``hello`` is sent each time a
subscription became live (first, and after each renewal): events published
while it was being set up may be missing, so a client re-reads what it shows
from events (the dashboard re-reads the output tail). Each event is
``event: <name>\\ndata: <json>\\n\\n``; the names are ``hello``, ``emit``,
``config``, ``control``, ``cancel``, ``worker`` (pushed state changes), ``run`` (a run
ended), ``identity`` (an identity blocked, retired or revived, every pool),
``depths``, ``workers`` (every worker's view, with each tick, so that
last-seen times and up/down stay current without polling), ``types`` (the
rows of ``GET /automations`` without their counts and depths: sent after the
first ``workers`` and again whenever the list changed) and ``error`` (the
backend failed; the stream ends). A dashboard with a live stream builds its
picture from these frames alone and polls the REST API only while the stream is
down.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse

from fleet.backends.base import Backend
from fleet.master.http.auth import read_access
from fleet.master.http.models import error_responses
from fleet.master.services.event_hub import event_stream
from fleet.master.state import backend_dependency, master_state

router = APIRouter(tags=["events"], responses=error_responses(401, 403, 503))


@router.get("/events", summary="Server-sent events for live views")
async def events(
    request: Request,
    types: str | None = Query(None, description="Comma-separated types to follow (default all)."),
    interval: float = Query(2.0, ge=0.2, le=60.0, description="Seconds between depth updates."),
    _: Any = Depends(read_access),
    backend: Backend = Depends(backend_dependency),
) -> StreamingResponse:
    """``text/event-stream`` of worker state changes, config and control events,
    emits and queue depths (every ``interval`` seconds)."""
    only = {t.strip() for t in types.split(",") if t.strip()} if types else None
    state = master_state(request)
    hub = state.events
    return StreamingResponse(
        event_stream(backend, interval, only, state.settings.heartbeat_seconds, hub),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
