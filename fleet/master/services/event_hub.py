"""One backend subscription and one poller for every live view of a master.

Each ``GET /api/v1/events`` client used to hold its own pub/sub subscription
and read the catalog, the queue depths and every worker record on its own
timer, so ten open dashboards cost ten subscriptions and ten times the reads.
The hub does that work once per master and fans the frames out:

* it runs only while at least one client is connected;
* it subscribes to the topics of every catalogued type (renewed when a type
  appears; every client then hears ``hello`` again, as before);
* it reads depths and workers when some client is due (each client keeps its
  own ``interval``), off the relay loop: events are relayed while the read is
  under way (at 1,000 workers a read takes long enough to hold up every frame
  behind it), and the worker views come from the master's shared read
  (:mod:`~fleet.master.services.shared_views`, also behind ``GET /workers``);
  it sends each client only the types it follows: with
  ``depths`` and ``workers``, a ``types`` frame (each type's summary, the rows
  of ``GET /automations`` without their counts) whenever it changed for that
  client, so that a dashboard follows the fleet from frames without polling;
* a client that stops reading is cut off after ``MAX_PENDING`` frames, with
  an ``error`` frame, so one stuck browser cannot grow the master's memory;
* a backend failure ends every stream with an ``error`` frame (clients
  reconnect and a new hub starts).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from fleet.backends.base import Backend, Subscription
from fleet.core.access.router import DOMAINS_TOPIC
from fleet.core.catalog import CatalogEntry
from fleet.core.errors import BackendError
from fleet.core.identity import IDENTITIES_TOPIC
from fleet.core.outage import OutageLog, is_outage
from fleet.core.redact import mask_credentials
from fleet.core.results import progress_topic
from fleet.master.services.catalog import all_entries, summary
from fleet.master.services.shared_views import SharedWorkerViews
from fleet.protocol import cancel_topic, config_topic, control_topic, emit_topic, worker_topic

log = logging.getLogger(__name__)

#: The backend topics of one type, and the event name each is sent under.
TOPICS: tuple[tuple[Callable[[str], str], str], ...] = (
    (emit_topic, "emit"),
    (config_topic, "config"),
    (control_topic, "control"),
    (cancel_topic, "cancel"),
    (worker_topic, "worker"),
    (progress_topic, "progress"),
)
#: Always subscribed, so that a fleet with no types yet still has a subscription.
IDLE_TOPIC = "master.events"
#: Fleet-wide: a run ended (the memory and SQLite backends publish its record in the
#: step that ended it); relayed to every client as the event ``run``.
RUNS_TOPIC = "runs"
#: Fleet-wide: a type's daily budget holds its dispatch (the step that added its meters
#: publishes ``{event: "paused", type, until, reason}``); relayed as ``budget``.
BUDGETS_TOPIC = "budgets"
#: Fleet-wide: an identity was blocked, retired or revived (``IDENTITIES_TOPIC``:
#: workers and the REST API publish there); relayed to every client as ``identity``.
IDENTITY_EVENT = "identity"
#: Per type: a domain moved to another proxy tier (``DOMAINS_TOPIC``: workers publish
#: there); relayed as ``tier`` to the clients that follow the type.
TIER_EVENT = "tier"
#: Frames a client may have unread before it is cut off.
MAX_PENDING = 1000
#: Longest the hub sleeps before it looks at its clients again (a new client
#: with a short interval is served within this).
PLAN_SECONDS = 0.2


def format_event(name: str, data: Any) -> bytes:
    """One SSE frame: ``event: <name>\\ndata: <json>\\n\\n``."""

    return (
        f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'), default=str)}\n\n".encode()
    )


def topic_map(types: set[str]) -> dict[str, tuple[str, str]]:
    """Every topic of ``types``, mapped to ``(event name, type)``."""
    return {topic(t): (name, t) for t in types for topic, name in TOPICS}


def topic_event(topic: str, types: set[str]) -> tuple[str, str] | None:
    """``(event name, type)`` of a backend topic, or None if it is not ours."""
    return topic_map(types).get(topic)


def identity_frame(message: Any) -> bytes | None:
    """The ``identity`` frame of an identity event: its known fields only, the reason's
    URL credentials masked (the stream is read by read tokens); None if malformed."""
    if not isinstance(message, dict) or not all(
        isinstance(message.get(key), str) for key in ("pool", "id", "event")
    ):
        return None
    reason = message.get("reason")
    cooling = message.get("cooling_until")
    return format_event(
        IDENTITY_EVENT,
        {
            "pool": message["pool"],
            "id": message["id"],
            "event": message["event"],
            "reason": mask_credentials(reason) if isinstance(reason, str) else None,
            "cooling_until": cooling if isinstance(cooling, int | float) else None,
        },
    )


def type_rows(entries: dict[str, CatalogEntry], worker_types: set[str]) -> list[dict[str, Any]]:
    """The ``types`` frame: every catalogued type and every type with workers,
    as ``GET /automations`` lists them, without the worker counts and depths
    (the ``workers`` and ``depths`` frames carry those); an entry that cannot be
    read is listed with ``unreadable`` (why)."""
    return [summary(t, entries.get(t)) for t in sorted({*entries, *worker_types})]


@dataclass(frozen=True)
class _Snapshot:
    """One read of what the clients are sent on their tick."""

    depths: dict[str, Any]
    workers: list[dict[str, Any]]
    types: list[dict[str, Any]]
    #: the frames of a client that follows every type, made for the first one only
    #: (the ``workers`` frame of 1,000 workers is ~0.5 MB of JSON)
    every: dict[str, bytes] = field(default_factory=dict, compare=False)

    def frame(self, name: str, data: Any, client: _Client) -> bytes:
        """The ``name`` frame of ``data`` for ``client`` (``data`` already filtered)."""
        if client.only is not None:
            return format_event(name, data)
        if name not in self.every:
            self.every[name] = format_event(name, data)
        return self.every[name]


@dataclass(eq=False)
class _Client:
    """One connected stream: what it follows and the frames it has not read."""

    only: set[str] | None
    interval: float
    due: float = 0.0  # loop time of its next depths/workers frames
    types_sent: bytes | None = None  # the last ``types`` frame it was sent
    queue: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)
    ended: bool = False

    def follows(self, automation_type: str) -> bool:
        return self.only is None or automation_type in self.only

    def send(self, frame: bytes) -> None:
        if self.ended:
            return
        if self.queue.qsize() >= MAX_PENDING:
            self.end(format_event("error", {"detail": "the client read too slowly; reconnect"}))
            return
        self.queue.put_nowait(frame)

    def end(self, last: bytes | None = None) -> None:
        if self.ended:
            return
        if last is not None:
            self.queue.put_nowait(last)
        self.queue.put_nowait(None)
        self.ended = True


class EventHub:
    """The shared source of every event stream of one master.

    Args:
        backend: The master's backend.
        heartbeat_seconds: Heartbeat period, to tell up from down in worker views.
        views: The master's shared read of the worker views (None: the hub keeps
            one of its own).
    """

    def __init__(
        self,
        backend: Backend,
        heartbeat_seconds: float,
        views: SharedWorkerViews | None = None,
    ) -> None:
        self.backend = backend
        self.heartbeat_seconds = heartbeat_seconds
        self._own_views = views is None
        self.views = views if views is not None else SharedWorkerViews(backend, heartbeat_seconds)
        self._clients: set[_Client] = set()
        self._task: asyncio.Task[None] | None = None
        self._ending: set[asyncio.Task[None]] = set()  # cancelled, still cleaning up
        self._types: set[str] | None = None  # subscribed types, None until live
        self._topics: dict[str, tuple[str, str]] = {}  # their topics -> (event, type)
        self._last: _Snapshot | None = None
        #: Subscriptions opened so far (what sharing saves is visible in tests).
        self.subscriptions_opened = 0
        self._outages = OutageLog(log)

    @property
    def clients(self) -> int:
        """Streams connected now."""
        return len(self._clients)

    @property
    def running(self) -> bool:
        """True while the hub reads the backend (someone is watching)."""
        return self._task is not None and not self._task.done()

    async def stream(self, interval: float, only: set[str] | None = None) -> AsyncIterator[bytes]:
        """The SSE frames of one client, until it goes away or the hub ends it."""
        client = _Client(only, interval)
        self._join(client)
        try:
            while True:
                frame = await client.queue.get()
                if frame is None:
                    return
                yield frame
        finally:
            self._leave(client)

    async def close(self) -> None:
        """End every stream and stop the hub (the master is shutting down)."""
        for client in list(self._clients):
            client.end()
        self._clients.clear()
        await self._stop()
        if self._own_views:
            await self.views.close()

    # ------------------------------------------------------------------ clients
    def _join(self, client: _Client) -> None:
        self._clients.add(client)
        if self._task is None or self._task.done():
            # the first viewer (or the first since the hub ended): start reading;
            # the new subscription says hello to everyone connected
            self._types = None
            self._last = None
            self._task = asyncio.create_task(self._run(), name="fleet-events")
            return
        # the hub is running: this client hears what the others already know
        if self._types is not None:
            client.send(self._hello(client))
        if self._last is not None:
            self._send_snapshot(client, self._last)
            client.due = asyncio.get_running_loop().time() + client.interval

    def _leave(self, client: _Client) -> None:
        self._clients.discard(client)
        if not self._clients and self._task is not None:
            # the last viewer left: stop reading the backend (its subscription is
            # closed by the task's own cleanup, which close() waits for)
            self._task.cancel()
            self._ending.add(self._task)
            self._task.add_done_callback(self._ending.discard)
            self._task = None
            self._types = None
            self._last = None

    async def _stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            self._ending.add(task)
        for ending in list(self._ending):
            with contextlib.suppress(asyncio.CancelledError):
                await ending
        self._ending.clear()

    def _hello(self, client: _Client) -> bytes:
        types = sorted(t for t in self._types or () if client.follows(t))
        return format_event("hello", {"types": types})

    def _send_snapshot(self, client: _Client, snap: _Snapshot) -> None:
        depths = {t: d for t, d in snap.depths.items() if client.follows(t)}
        client.send(snap.frame("depths", depths, client))
        workers = [w for w in snap.workers if client.follows(str(w.get("type")))]
        client.send(snap.frame("workers", workers, client))
        # the type list changes rarely: sent on join and when it changed
        rows = [r for r in snap.types if client.follows(r["type"])]
        types = snap.frame("types", rows, client)
        if types != client.types_sent:
            client.types_sent = types
            client.send(types)

    def _end_all(self, last: bytes | None) -> None:
        for client in list(self._clients):
            client.end(last)
        self._clients.clear()

    # ------------------------------------------------------------------ the loop
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        sub: Subscription | None = None
        pending: asyncio.Future[tuple[str, Any]] | None = None
        # The read of a tick runs beside the relay: frames keep flowing while it is
        # under way, and the tick is sent when it is done.
        reading: asyncio.Task[tuple[dict[str, CatalogEntry], _Snapshot]] | None = None
        try:
            entries = await all_entries(self.backend)
            sub = await self._subscribe(set(entries))
            first: dict[str, CatalogEntry] | None = entries  # the first tick reuses it
            while self._clients:
                if reading is None and any(c.due <= loop.time() for c in self._clients):
                    reading = asyncio.create_task(self._tick_read(first), name="fleet-events-read")
                    first = None
                if reading is not None and reading.done():
                    entries, snap = reading.result()
                    reading = None
                    if set(entries) - (self._types or set()):
                        # new types: cover their topics too (events published
                        # while renewing may be missed, hence a fresh hello)
                        if pending is not None:
                            pending.cancel()
                            pending = None
                        await sub.aclose()
                        sub = await self._subscribe(set(entries))
                    self._last = snap
                    now = loop.time()
                    for client in [c for c in self._clients if c.due <= now]:
                        self._send_snapshot(client, snap)
                        client.due = now + client.interval
                    continue  # another client may be due already
                if pending is None:
                    pending = asyncio.ensure_future(sub.__anext__())
                waiting: set[asyncio.Future[Any]] = {pending}
                wait: float | None = None
                if reading is not None:
                    waiting.add(reading)  # wakes up as soon as the tick is read
                else:
                    wait = PLAN_SECONDS
                    if self._clients:
                        soonest = min(c.due for c in self._clients) - loop.time()
                        wait = min(wait, max(0.0, soonest))
                done, _ = await asyncio.wait(
                    waiting, timeout=wait, return_when=asyncio.FIRST_COMPLETED
                )
                if pending in done:
                    got, pending = pending.result(), None
                    self._relay(got)
        except StopAsyncIteration:
            self._end_all(None)  # the backend closed the subscription (shutdown)
        except BackendError as exc:
            if is_outage(exc):  # clients reconnect at once: one line per outage, not per try
                self._outages.failed("event hub", exc, hint="ending the event streams")
            detail = f"backend unavailable: {exc.message}"
            self._end_all(format_event("error", {"detail": detail}))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # never leave viewers hanging on a bug
            log.exception("event hub failed")
            self._end_all(format_event("error", {"detail": f"event hub failed: {exc}"}))
        finally:
            for task in (pending, reading):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        await task
            if sub is not None:
                with contextlib.suppress(Exception):
                    await sub.aclose()

    async def _tick_read(
        self, entries: dict[str, CatalogEntry] | None
    ) -> tuple[dict[str, CatalogEntry], _Snapshot]:
        """The catalog (``entries`` if just read) and the snapshot of one tick."""
        if entries is None:
            entries = await all_entries(self.backend)
        return entries, await self._snapshot(entries)

    async def _subscribe(self, types: set[str]) -> Subscription:
        topics = topic_map(types)
        sub = await self.backend.events.subscribe(
            IDLE_TOPIC,
            RUNS_TOPIC,
            BUDGETS_TOPIC,
            IDENTITIES_TOPIC,
            DOMAINS_TOPIC,
            *sorted(topics),
        )
        self.subscriptions_opened += 1
        self._outages.recovered("event hub")
        self._types = types
        self._topics = topics
        for client in self._clients:
            client.send(self._hello(client))
        return sub

    def _relay(self, message: tuple[str, Any]) -> None:
        if message[0] in (RUNS_TOPIC, BUDGETS_TOPIC):
            frame = format_event("run" if message[0] == RUNS_TOPIC else "budget", message[1])
            for client in self._clients:
                client.send(frame)
            return
        if message[0] == IDENTITIES_TOPIC:
            shown = identity_frame(message[1])
            if shown is not None:
                for client in self._clients:
                    client.send(shown)
            return
        if message[0] == DOMAINS_TOPIC:
            data = message[1]
            owner = data.get("type") if isinstance(data, dict) else None
            if isinstance(owner, str):
                frame = format_event(TIER_EVENT, data)
                for client in self._clients:
                    if client.follows(owner):
                        client.send(frame)
            return
        found = self._topics.get(message[0])
        if found is None:
            return
        name, automation_type = found
        frame = format_event(name, {"type": automation_type, "data": message[1]})
        for client in self._clients:
            if client.follows(automation_type):
                client.send(frame)

    async def _snapshot(self, entries: dict[str, CatalogEntry]) -> _Snapshot:
        queued = [t for t, entry in sorted(entries.items()) if entry.get("queue")]
        # the types' depths at once (one round trip each, not one after another)
        found = await asyncio.gather(*(self.backend.queues.depths(t) for t in queued))
        depths = {t: d.to_dict() for t, d in zip(queued, found, strict=True)}
        # every worker, as GET /workers lists them (a type may have workers
        # before or after its catalog entry)
        read = await self.views.read()
        return _Snapshot(depths, read.views, type_rows(entries, read.types))


async def event_stream(
    backend: Backend,
    interval: float,
    only: set[str] | None = None,
    heartbeat_seconds: float = 5.0,
    hub: EventHub | None = None,
) -> AsyncIterator[bytes]:
    """The SSE byte stream for one client; ends when the client goes away, the
    backend closes, or the backend fails (after an ``error`` event).

    Args:
        backend: Where events and depths come from.
        interval: Seconds between ``depths``/``workers`` frames for this client.
        only: Types to follow (None: every catalogued type).
        heartbeat_seconds: Heartbeat period, for worker up/down.
        hub: The master's shared hub; without one the stream gets a hub of its own.
    """
    own = hub is None
    shared = hub if hub is not None else EventHub(backend, heartbeat_seconds)
    try:
        async for frame in shared.stream(interval, only):
            yield frame
    finally:
        if own:
            await shared.close()
