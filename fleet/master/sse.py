"""``GET /api/v1/events``: server-sent events for live views.

One stream per client: it subscribes to the backend's event topics of every
catalogued type (``<type>.emit``, ``config.<type>``, ``control.<type>``,
``cancel.<type>``, ``worker.<type>``) and, every ``interval`` seconds, sends
the queue depths of every batch type. When new types appear in the catalog
the subscription is renewed to cover them. Each event is
``event: <name>\\ndata: <json>\\n\\n``; the names are ``hello``, ``emit``,
``config``, ``control``, ``cancel``, ``worker`` (pushed state changes),
``depths`` and ``workers`` (every worker's view, with each tick, so that
last-seen times and up/down stay current without polling).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse

from fleet.backends.base import Backend, Subscription
from fleet.master.api_workers import load_views
from fleet.master.auth import read_access
from fleet.master.models import error_responses
from fleet.master.state import backend_dependency, master_state

router = APIRouter(tags=["events"], responses=error_responses(401, 403, 503))

#: Topic templates per type and the event name each is sent under.
TOPICS = (
    ("{t}.emit", "emit"),
    ("config.{t}", "config"),
    ("control.{t}", "control"),
    ("cancel.{t}", "cancel"),
    ("worker.{t}", "worker"),
)


def format_event(name: str, data: Any) -> bytes:
    """One SSE frame."""
    return (
        f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'), default=str)}\n\n".encode()
    )


def topic_event(topic: str, types: set[str]) -> tuple[str, str] | None:
    """``(event name, type)`` of a backend topic, or None if it is not ours."""
    for template, name in TOPICS:
        prefix, _, suffix = template.partition("{t}")
        if topic.startswith(prefix) and topic.endswith(suffix):
            t = topic[len(prefix) : len(topic) - len(suffix)]
            if t in types:
                return name, t
    return None


async def _subscribe(backend: Backend, types: set[str]) -> Subscription:
    topics = [template.format(t=t) for t in sorted(types) for template, _ in TOPICS]
    return await backend.subscribe(*topics)


async def _depths(backend: Backend, entries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    out = {}
    for t, entry in sorted(entries.items()):
        if entry.get("queue"):
            out[t] = (await backend.depths(t)).to_dict()
    return out


async def _workers(
    backend: Backend, types: set[str], heartbeat_seconds: float
) -> list[dict[str, Any]]:
    pairs = [p for p in await backend.workers_all() if p[0] in types]
    return await load_views(backend, pairs, heartbeat_seconds)


async def event_stream(
    backend: Backend,
    interval: float,
    only: set[str] | None = None,
    heartbeat_seconds: float = 5.0,
) -> AsyncIterator[bytes]:
    """The SSE byte stream for one client; ends when the client goes away."""
    entries = {t: e for t, e in (await backend.catalog_all()).items() if not only or t in only}
    types = set(entries)
    sub = await _subscribe(backend, types)
    next_msg: asyncio.Task[tuple[str, Any]] | None = None
    try:
        yield format_event("hello", {"types": sorted(types)})
        yield format_event("depths", await _depths(backend, entries))
        yield format_event("workers", await _workers(backend, types, heartbeat_seconds))
        loop = asyncio.get_running_loop()
        next_tick = loop.time() + interval
        while True:
            if next_msg is None:
                next_msg = asyncio.ensure_future(sub.__anext__())
            done, _ = await asyncio.wait({next_msg}, timeout=max(0.0, next_tick - loop.time()))
            if next_msg in done:
                topic, message = next_msg.result()
                next_msg = None
                found = topic_event(topic, types)
                if found is not None:
                    yield format_event(found[0], {"type": found[1], "data": message})
                continue
            next_tick = loop.time() + interval
            entries = {
                t: e for t, e in (await backend.catalog_all()).items() if not only or t in only
            }
            if set(entries) - types:
                # New types: renew the subscription to cover them.
                next_msg.cancel()
                with contextlib.suppress(BaseException):
                    await next_msg
                next_msg = None
                await sub.aclose()
                types = set(entries)
                sub = await _subscribe(backend, types)
            yield format_event("depths", await _depths(backend, entries))
            yield format_event("workers", await _workers(backend, types, heartbeat_seconds))
    finally:
        if next_msg is not None:
            next_msg.cancel()
            with contextlib.suppress(BaseException):
                await next_msg
        await sub.aclose()


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
    return StreamingResponse(
        event_stream(backend, interval, only, master_state(request).settings.heartbeat_seconds),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
