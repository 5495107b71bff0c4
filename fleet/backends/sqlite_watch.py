"""Cross-process wake-ups of the SQLite backend: blocked reserves and events.

Other processes cannot signal us, so one watcher task per backend instance
polls the file, and only while someone waits (a blocked reserve) or listens
(a subscription). Each poll first asks ``PRAGMA data_version``, which changes
only when another connection committed; when nothing changed, that is the
whole cost of a poll. Otherwise it reads the change counters (``signals``) of
the types somebody waits for and the events after its cursor, then wakes
waiters through asyncio futures and feeds subscriptions. Pushes and publishes
made by this process wake local waiters at once, without waiting for a poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from fleet.backends.base import Subscription
from fleet.backends.sqlite_conn import SQLiteDB
from fleet.backends.sqlite_state import last_event

log = logging.getLogger(__name__)

#: Events read per poll; a fuller batch triggers the next poll at once.
EVENT_BATCH = 1000


@dataclass(eq=False, slots=True)
class _Waiter:
    automation_type: str
    seen: int
    future: asyncio.Future[None]


@dataclass(frozen=True, slots=True)
class Polled:
    """What one poll found: the data version, and (if it changed) signals and events."""

    version: int
    signals: dict[str, int] | None = None
    events: list[tuple[int, str, str]] = field(default_factory=list)


def poll(
    conn: sqlite3.Connection,
    types: list[str],
    cursor: int | None,
    last_version: int | None,
    force: bool,
) -> Polled:
    """One watcher poll (runs on the watcher's connection, outside a transaction).

    Args:
        conn: The watcher's own connection.
        types: Types with blocked reservers.
        cursor: Last event sequence seen, or None when nobody listens.
        last_version: ``PRAGMA data_version`` of the previous poll.
        force: Read even if the data version did not change.

    Returns:
        The new version, and the signals/events if anything could have changed.
    """
    version = int(conn.execute("PRAGMA data_version").fetchone()[0])
    if version == last_version and not force:
        return Polled(version)
    signals: dict[str, int] = {}
    if types:
        marks = ",".join("?" * len(types))
        signals = dict(conn.execute(f"SELECT type, n FROM signals WHERE type IN ({marks})", types))
    events: list[tuple[int, str, str]] = []
    if cursor is not None:
        events = conn.execute(
            "SELECT seq, topic, message FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
            (cursor, EVENT_BATCH),
        ).fetchall()
    return Polled(version, signals, events)


class SQLiteSubscription(Subscription):
    """A subscription fed by the watcher (see :meth:`Backend.subscribe`)."""

    def __init__(self, watcher: Watcher, topics: frozenset[str]) -> None:
        self.topics = topics
        self.start = 0
        self._watcher = watcher
        self._queue: asyncio.Queue[tuple[str, Any] | None] = asyncio.Queue()
        self._closed = False

    def deliver(self, topic: str, message: Any) -> None:
        if not self._closed:
            self._queue.put_nowait((topic, message))

    async def __anext__(self) -> tuple[str, Any]:
        if self._closed and self._queue.empty():
            raise StopAsyncIteration
        item = await self._queue.get()
        if item is None:
            raise StopAsyncIteration
        return item

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            self._watcher.drop_subscription(self)
            self._queue.put_nowait(None)


class Watcher:
    """The one poller of a backend instance.

    Args:
        db: The backend's connections.
        interval: Seconds between polls while someone waits or listens.
    """

    def __init__(self, db: SQLiteDB, interval: float) -> None:
        self._db = db
        self._interval = interval
        self._waiters: dict[str, list[_Waiter]] = {}
        self._subs: set[SQLiteSubscription] = set()
        self._task: asyncio.Task[None] | None = None
        self._kick: asyncio.Event | None = None
        self._force = True
        self._version: int | None = None
        self._cursor = 0
        self._closed = False
        #: Polls made (each one ``PRAGMA data_version``, plus reads when it changed).
        self.polls = 0

    # ------------------------------------------------------------ reservers
    async def wait(self, automation_type: str, seen: int, timeout: float) -> None:
        """Sleep until the type's signal moves past ``seen`` or ``timeout`` passes."""
        if self._closed or timeout <= 0:
            return
        waiter = _Waiter(automation_type, seen, asyncio.get_running_loop().create_future())
        self._waiters.setdefault(automation_type, []).append(waiter)
        # A push may have landed between the caller's reserve and now.
        self._force = True
        self._ensure_running()
        try:
            async with asyncio.timeout(timeout):
                await waiter.future
        except TimeoutError:
            pass
        except asyncio.CancelledError:
            if waiter.future.done() and not waiter.future.cancelled():
                # We were woken for a task we will not take: pass the wake on.
                self.wake(automation_type, 1)
            raise
        finally:
            queue = self._waiters.get(automation_type, [])
            if waiter in queue:
                queue.remove(waiter)
            if not queue:
                self._waiters.pop(automation_type, None)

    def wake(self, automation_type: str, n: int, signal: int | None = None, bump: int = 0) -> None:
        """Wake up to ``n`` local waiters of a type, oldest first.

        Args:
            automation_type: The type.
            n: How many tasks became deliverable (at least one waiter is woken
                if ``bump`` > 0 so it can re-plan around new scheduled tasks).
            signal: The type's signal after the change, if this process made it.
            bump: How much that change moved the signal; waiters that were up to
                date before it are marked as having seen it (the woken ones take it).
        """
        n = max(n, 1 if bump else 0)
        for waiter in self._waiters.get(automation_type, []):
            if waiter.future.done():
                continue
            if n > 0:
                waiter.future.set_result(None)
                n -= 1
            elif signal is not None and waiter.seen >= signal - bump:
                waiter.seen = signal

    def _dispatch_signals(self, signals: dict[str, int]) -> None:
        for automation_type, value in signals.items():
            behind = [
                w
                for w in self._waiters.get(automation_type, [])
                if not w.future.done() and w.seen != value
            ]
            if not behind:
                continue
            wake = min(len(behind), max(1, value - min(w.seen for w in behind)))
            for waiter in behind[:wake]:
                waiter.future.set_result(None)
            for waiter in behind[wake:]:
                waiter.seen = value

    # ------------------------------------------------------------ events
    async def subscribe(self, topics: frozenset[str]) -> SQLiteSubscription:
        """A live subscription: it sees every event committed after this returns."""
        sub = SQLiteSubscription(self, topics)
        newest = await self._db.read(last_event)
        self._cursor = max(self._cursor, newest)
        sub.start = self._cursor
        self._subs.add(sub)
        self._ensure_running()
        return sub

    def drop_subscription(self, sub: SQLiteSubscription) -> None:
        self._subs.discard(sub)

    def kick(self) -> None:
        """Poll now (this process just published)."""
        if self._kick is not None:
            self._kick.set()

    # ------------------------------------------------------------ the loop
    def _ensure_running(self) -> None:
        if self._closed or (self._task is not None and not self._task.done()):
            return
        if self._kick is None:
            self._kick = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="fleet-sqlite-watch")

    async def _run(self) -> None:
        assert self._kick is not None
        while not self._closed and (self._waiters or self._subs):
            if not self._kick.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._interval):
                        await self._kick.wait()
            self._kick.clear()
            if not (self._waiters or self._subs):
                break
            force, self._force = self._force, False
            types = [t for t, ws in self._waiters.items() if ws]
            cursor = self._cursor if self._subs else None
            try:
                polled = await self._db.watch(
                    functools.partial(
                        poll, types=types, cursor=cursor, last_version=self._version, force=force
                    )
                )
            except Exception:
                log.exception("sqlite watcher poll failed; retrying")
                self._force = True
                await asyncio.sleep(self._interval * 10)
                continue
            self.polls += 1
            self._version = polled.version
            if polled.signals:
                self._dispatch_signals(polled.signals)
            if polled.events:
                self._dispatch_events(polled.events)

    def _dispatch_events(self, events: list[tuple[int, str, str]]) -> None:
        assert self._kick is not None
        for seq, topic, raw in events:
            self._cursor = max(self._cursor, seq)
            message: Any = None
            for sub in list(self._subs):
                if topic in sub.topics and seq > sub.start:
                    if message is None:
                        message = json.loads(raw)
                    sub.deliver(topic, message)
        if len(events) >= EVENT_BATCH:
            self._kick.set()

    async def close(self) -> None:
        """Stop polling, return every blocked wait and end every subscription."""
        self._closed = True
        for queue in self._waiters.values():
            for waiter in queue:
                if not waiter.future.done():
                    waiter.future.set_result(None)
        for sub in list(self._subs):
            await sub.aclose()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
