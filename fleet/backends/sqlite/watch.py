"""Wake-ups of the SQLite backend: blocked reserves and event subscriptions.

Blocked reserves wait on asyncio futures. Pushes made by this process wake
them at once; pushes made by other processes reach them through the poller
thread (:mod:`fleet.backends.sqlite.poller`), which watches each waited-for
type's change counter. One poller serves every waiter and subscription of a
backend instance. A change wakes as many waiters as tasks became deliverable,
not all of them, so ten idle slots do not stampede for one task.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from fleet.backends.base import Subscription
from fleet.backends.sqlite.conn import SQLiteDB
from fleet.backends.sqlite.poller import Polled, Poller


def last_event(conn: sqlite3.Connection) -> int:
    """The newest event's sequence number (0 if none)."""
    row = conn.execute("SELECT MAX(seq) FROM events").fetchone()
    return int(row[0]) if row[0] is not None else 0


@dataclass(eq=False, slots=True)
class _Waiter:
    automation_type: str
    seen: int
    future: asyncio.Future[None]


class SQLiteSubscription(Subscription):
    """A subscription fed by the watcher (see :meth:`Events.subscribe`)."""

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
    """Waiters and subscriptions of one backend instance, fed by one poller.

    Args:
        db: The backend's connections.
        interval: Seconds between polls while someone waits or listens.
    """

    def __init__(self, db: SQLiteDB, interval: float) -> None:
        self._db = db
        self._interval = interval
        self._waiters: dict[str, list[_Waiter]] = {}
        self._subs: set[SQLiteSubscription] = set()
        self._poller: Poller | None = None
        self._closed = False

    @property
    def polls(self) -> int:
        """Polls made (each one ``PRAGMA data_version``, plus reads when it changed)."""
        return 0 if self._poller is None else self._poller.polls

    # ------------------------------------------------------------ reservers
    async def wait(self, automation_type: str, seen: int, timeout: float) -> bool:
        """Sleep until the type's signal moves past ``seen`` (True) or ``timeout``
        passes (False)."""
        if self._closed or timeout <= 0:
            return False
        waiter = _Waiter(automation_type, seen, asyncio.get_running_loop().create_future())
        self._waiters.setdefault(automation_type, []).append(waiter)
        # A push may have landed between the caller's reserve and now: read the
        # counters at once instead of trusting an unchanged data version.
        self._steer(force=True)
        try:
            async with asyncio.timeout(timeout):
                await waiter.future
            return True
        except TimeoutError:
            return False
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
                self._steer()

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
        self._subs.add(sub)
        # Forced: a poller already running for blocked reserves may have seen
        # the data version of an event committed after ``newest`` while it was
        # not reading events; unforced, it would wait for the next commit.
        poller = self._steer(force=True)
        # Events up to the poller's cursor were committed before now: skip them.
        # (The poller delivers through the event loop, so nothing reaches this
        # subscription before ``start`` is set.)
        sub.start = max(newest, poller.cursor if poller is not None else 0)
        if poller is not None:
            poller.event_floor = max(poller.event_floor, newest)
        return sub

    def drop_subscription(self, sub: SQLiteSubscription) -> None:
        self._subs.discard(sub)
        self._steer()

    def kick(self) -> None:
        """Poll now (this process just published)."""
        if self._poller is not None and self._subs:
            self._poller.kick()

    # ------------------------------------------------------------ the poller
    def _steer(self, force: bool = False) -> Poller | None:
        """Tell the poller what to watch (starting it on first need)."""
        if self._closed:
            return None
        if self._poller is None:
            if not (self._waiters or self._subs):
                return None
            self._poller = self._db.poller(
                self._interval, self._on_change, asyncio.get_running_loop()
            )
        idle = not (self._poller.types or self._poller.listening)
        self._poller.types = tuple(t for t, ws in self._waiters.items() if ws)
        self._poller.listening = bool(self._subs)
        if force or (idle and (self._poller.types or self._poller.listening)):
            # A parked poller sleeps until kicked.
            self._poller.kick(force=True)
        return self._poller

    def _on_change(self, polled: Polled) -> None:
        if self._closed:
            return
        if polled.signals:
            self._dispatch_signals(polled.signals)
        for seq, topic, raw in polled.events:
            message: Any = None
            for sub in list(self._subs):
                if topic in sub.topics and seq > sub.start:
                    if message is None:
                        message = _message(raw)
                    sub.deliver(topic, message)

    async def close(self) -> None:
        """Stop polling, return every blocked wait and end every subscription."""
        self._closed = True
        for queue in self._waiters.values():
            for waiter in queue:
                if not waiter.future.done():
                    waiter.future.set_result(None)
        for sub in list(self._subs):
            await sub.aclose()
        poller, self._poller = self._poller, None
        if poller is not None:
            poller.stop()
            await asyncio.to_thread(poller.join)


def _message(raw: str) -> Any:
    """An event's message; one stored as text that is not JSON is delivered as that
    text (as on Redis), never failing the poller that wakes every subscriber."""
    try:
        return json.loads(raw)
    except (TypeError, ValueError):
        return raw
