"""One read of every worker's view, shared by every reader of a master.

Reading the view of every worker costs the backend a few commands per worker and
the master the decoding of their replies: at 1,000 workers, a few hundred
milliseconds of the master's only core. ``GET /workers``, ``GET /automations``
(the overview) and the event hub's ``workers`` frames each used to make that read
on their own, per request, per type and per tick, so a handful of open dashboards
and pollers kept the master busy and made every answer wait for its own read.

:class:`SharedWorkerViews` makes the read once for all of them:

* a reader that takes a read older than :data:`REFRESH_AFTER_SECONDS` starts the
  next one in the background, so whatever the number of readers, the backend is
  read about once a second at most (and not at all while nobody looks);
* a reader is served the last read while it is at most :data:`MAX_AGE_SECONDS`
  old (the age counts from when the read started; a read takes up to a second
  at 1,000 workers on a busy machine), so a steady reader (a poller, an open
  dashboard) never waits for a read: only the first reader after a quiet spell does;
* readers that arrive while a read is under way and find nothing fresh enough
  share that read instead of starting their own;
* this master's own writes that change a view (forgetting, draining or resuming a
  worker, a config PATCH, deleting a type) call :meth:`invalidate`: the next
  reader waits for a read that started after the write, so a write is visible to
  the next request at once, as before.

What that means for callers: a change made elsewhere (a heartbeat, a worker's new
state, another master's write) shows within two seconds (pushed state changes reach
the event stream at once, as ``worker`` events); ``seen_ago`` and ``up`` are as of
when the read started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter

from fleet.backends.base import Backend
from fleet.master.services.workers_view import load_views

log = logging.getLogger(__name__)

#: Oldest a shared read may be when it is served (seconds since it started).
MAX_AGE_SECONDS = 2.0
#: A reader served a read older than this starts the next one in the background.
REFRESH_AFTER_SECONDS = 1.0
#: How ``GET /workers`` serializes a list of views (what FastAPI would make of the
#: route's return value: the same JSON, made once per read instead of per request).
_VIEWS_JSON: TypeAdapter[list[dict[str, Any]]] = TypeAdapter(list[dict[str, Any]])


@dataclass(frozen=True)
class WorkersRead:
    """One read of every worker: the index and the view of each worker in it.

    Attributes:
        pairs: Every ``(type, worker_id)`` of the index, sorted (a pair whose record
            is gone has no view).
        views: The view of each pair that still has a record, in the same order
            (:func:`~fleet.master.services.workers_view.load_views`).
        started: Monotonic time the read started.
    """

    pairs: list[tuple[str, str]]
    views: list[dict[str, Any]]
    started: float
    _by_type: dict[str, list[dict[str, Any]]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _json: list[bytes] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for view in self.views:
            self._by_type.setdefault(str(view["type"]), []).append(view)

    @property
    def types(self) -> set[str]:
        """Every type that has a worker in the index."""
        return {t for t, _ in self.pairs}

    def of_type(self, automation_type: str) -> list[dict[str, Any]]:
        """The views of one type's workers (empty if it has none)."""
        return self._by_type.get(automation_type, [])

    def visible(self, sees_type: Callable[[str], bool]) -> list[dict[str, Any]]:
        """The views of the workers whose type ``sees_type`` lets through, in order."""
        return [v for v in self.views if sees_type(str(v["type"]))]

    def json(self, sees_type: Callable[[str], bool] | None = None) -> bytes:
        """The JSON array of :meth:`visible` (every view with None), as ``GET
        /workers`` answers it; the array of every view is made once per read."""
        if sees_type is not None:
            return _VIEWS_JSON.dump_json(self.visible(sees_type))
        if not self._json:
            self._json.append(_VIEWS_JSON.dump_json(self.views))
        return self._json[0]


class SharedWorkerViews:
    """The read of every worker's view that one master's readers share.

    Args:
        backend: The master's backend.
        heartbeat_seconds: Heartbeat period, to tell up from down.
        max_age: Oldest a read may be when served (seconds; 0 reads for every reader,
            though readers arriving during a read still share it).
        refresh_after: Age past which a reader starts the next read in the background.
        clock: Monotonic time source.
    """

    def __init__(
        self,
        backend: Backend,
        heartbeat_seconds: float,
        *,
        max_age: float = MAX_AGE_SECONDS,
        refresh_after: float = REFRESH_AFTER_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backend = backend
        self.heartbeat_seconds = heartbeat_seconds
        self.max_age = max_age
        self.refresh_after = min(refresh_after, max_age)
        self._clock = clock
        self._generation = 0  # bumped by invalidate()
        self._last: WorkersRead | None = None
        self._last_generation = -1
        # the read under way: its task, when it started and the generation it serves
        self._running: asyncio.Task[WorkersRead] | None = None
        self._running_started = 0.0
        self._running_generation = -1
        #: Reads made from the backend so far (what sharing saves is visible in tests).
        self.reads = 0

    async def read(self) -> WorkersRead:
        """A read at most ``max_age`` old that started after the last invalidation.

        Raises:
            BackendError: the read this call waited for failed (nothing is cached
                from a failed read: the next call tries again).
        """
        now = self._clock()
        last = self._last
        if last is not None and self._last_generation == self._generation:
            age = now - last.started
            if age <= self.max_age:
                if age > self.refresh_after:
                    self._start(now)  # in the background: this reader does not wait
                return last
        task = self._joinable(now) or self._start(now)
        # shielded: a reader that goes away (a closed connection) does not cancel
        # the read the others wait for
        return await asyncio.shield(task)

    def invalidate(self) -> None:
        """Forget every read made so far: this master just changed what a view shows,
        and the next reader must see it."""
        self._generation += 1

    async def close(self) -> None:
        """Cancel a read under way (the master is shutting down)."""
        task, self._running = self._running, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    def _joinable(self, now: float) -> asyncio.Task[WorkersRead] | None:
        task = self._running
        if task is None or task.done() or self._running_generation != self._generation:
            return None
        # a read that started too long ago is too old for this reader too
        return task if now - self._running_started <= self.max_age else None

    def _start(self, now: float) -> asyncio.Task[WorkersRead]:
        running = self._joinable(now)
        if running is not None:
            return running
        generation = self._generation
        task = asyncio.create_task(self._read(now, generation), name="fleet-worker-views")
        # nobody may be left to await it (a background read, or readers that went
        # away): its failure is logged here, and raised to whoever still waits
        task.add_done_callback(_log_failure)
        self._running, self._running_started = task, now
        self._running_generation = generation
        return task

    async def _read(self, started: float, generation: int) -> WorkersRead:
        self.reads += 1
        pairs = await self.backend.workers.all()
        views = await load_views(self.backend, pairs, self.heartbeat_seconds)
        got = WorkersRead(pairs, views, started)
        newest = self._last is None or started >= self._last.started
        if generation == self._generation and newest:
            self._last, self._last_generation = got, generation
        return got


def _log_failure(task: asyncio.Task[WorkersRead]) -> None:
    if task.cancelled():
        return
    exc = task.exception()  # retrieved, so asyncio does not warn about it
    if exc is not None:
        log.debug("a read of the worker views failed: %s", exc)
