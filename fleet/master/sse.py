"""``GET /api/v1/events``: server-sent events for live views.

One stream per client: it subscribes to the backend's event topics of every
catalogued type (``<type>.emit``, ``config.<type>``, ``control.<type>``,
``cancel.<type>``, ``worker.<type>``) and, every ``interval`` seconds, sends
the queue depths of every batch type. When new types appear in the catalog
the subscription is renewed to cover them. ``hello`` is sent each time a
subscription became live (first, and after each renewal): events published
while it was being set up may be missing, so a client re-reads what it shows
from events (the dashboard re-reads the output tail). Each event is
``event: <name>\\ndata: <json>\\n\\n``; the names are ``hello``, ``emit``,
``config``, ``control``, ``cancel``, ``worker`` (pushed state changes),
``depths``, ``workers`` (every worker's view, with each tick, so that
last-seen times and up/down stay current without polling) and ``error`` (the
backend failed; the stream ends).
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
from fleet.core.errors import BackendError
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


#: Always subscribed, so that a fleet with no types yet still has a subscription.
IDLE_TOPIC = "master.events"


async def _subscribe(backend: Backend, types: set[str]) -> Subscription:
    topics = [template.format(t=t) for t in sorted(types) for template, _ in TOPICS]
    return await backend.subscribe(IDLE_TOPIC, *topics)


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


class _Listener:
    """The backend subscription of one stream and its pending read."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.sub: Subscription | None = None
        self.pending: asyncio.Task[tuple[str, Any]] | None = None

    async def listen(self, types: set[str]) -> None:
        """(Re)subscribe to the topics of ``types``."""
        await self.close()
        self.sub = await _subscribe(self.backend, types)

    async def next(self, timeout: float) -> tuple[str, Any] | None:
        """The next message, or None if none came within ``timeout`` seconds.

        Raises:
            StopAsyncIteration: The backend ended the subscription.
        """
        assert self.sub is not None
        if self.pending is None:
            self.pending = asyncio.ensure_future(self.sub.__anext__())
        done, _ = await asyncio.wait({self.pending}, timeout=timeout)
        if not done:
            return None
        task, self.pending = self.pending, None
        return task.result()

    async def close(self) -> None:
        if self.pending is not None:
            self.pending.cancel()
            with contextlib.suppress(BaseException):
                await self.pending
            self.pending = None
        if self.sub is not None:
            await self.sub.aclose()
            self.sub = None


async def event_stream(
    backend: Backend,
    interval: float,
    only: set[str] | None = None,
    heartbeat_seconds: float = 5.0,
) -> AsyncIterator[bytes]:
    """The SSE byte stream for one client; ends when the client goes away, the
    backend closes, or the backend fails (after an ``error`` event)."""

    async def catalog() -> dict[str, dict[str, Any]]:
        return {t: e for t, e in (await backend.catalog_all()).items() if not only or t in only}

    listener = _Listener(backend)
    try:
        entries = await catalog()
        types = set(entries)
        await listener.listen(types)
        yield format_event("hello", {"types": sorted(types)})
        loop = asyncio.get_running_loop()
        next_tick = loop.time()
        while True:
            if loop.time() >= next_tick:
                next_tick = loop.time() + interval
                entries = await catalog()
                if set(entries) - types:
                    types = set(entries)  # new types: cover their topics too
                    await listener.listen(types)
                    yield format_event("hello", {"types": sorted(types)})
                yield format_event("depths", await _depths(backend, entries))
                yield format_event("workers", await _workers(backend, types, heartbeat_seconds))
            try:
                got = await listener.next(max(0.0, next_tick - loop.time()))
            except StopAsyncIteration:
                return  # the backend closed the subscription (shutdown)
            if got is not None:
                found = topic_event(got[0], types)
                if found is not None:
                    yield format_event(found[0], {"type": found[1], "data": got[1]})
    except BackendError as exc:
        # The headers are sent already: say why the stream ends instead of cutting it.
        yield format_event("error", {"detail": f"backend unavailable: {exc.message}"})
    finally:
        await listener.close()


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
