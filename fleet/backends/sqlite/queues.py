"""Task queues of the SQLite backend (``backend.queues``): each operation one
transaction of :mod:`~fleet.backends.sqlite.queue` or
:mod:`~fleet.backends.sqlite.queue_admin`, then the wake-ups it calls for."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import TypeVar

from fleet.backends.sqlite import queue as q
from fleet.backends.sqlite import queue_admin as qa
from fleet.backends.sqlite import signals
from fleet.backends.sqlite.conn import SQLiteDB
from fleet.backends.sqlite.watch import Watcher
from fleet.core.capabilities import TaskQueues
from fleet.core.capabilities.queues import Taken
from fleet.core.records import (
    CancelOutcome,
    LeaseStatus,
    NackOutcome,
    PushRequest,
    PushResult,
    QueueDepths,
    TaskBody,
    TaskInfo,
    now,
)

T = TypeVar("T")


async def write_waking(
    db: SQLiteDB, watcher: Watcher, automation_type: str, op: Callable[[sqlite3.Connection], T]
) -> T:
    """Run a write that may make tasks deliverable, and wake as many local
    reservers as it moved the type's signal (other processes' pollers see it)."""

    def run(conn: sqlite3.Connection) -> tuple[T, int, int]:
        before = signals.read_signal(conn, automation_type)
        return op(conn), before, signals.read_signal(conn, automation_type)

    out, before, after = await db.write(run)
    if after != before:
        watcher.wake(automation_type, after - before, after, after - before)
    return out


class SQLiteQueues(TaskQueues):
    """The queues of one database file, as one backend instance sees them."""

    def __init__(self, db: SQLiteDB, watcher: Watcher) -> None:
        self._db = db
        self._watcher = watcher
        self._is_closed = False

    @property
    def _closed(self) -> bool:
        return self._is_closed

    def close(self) -> None:
        """Blocked reserves return ``[]`` from now on."""
        self._is_closed = True

    async def push(self, automation_type: str, requests: Sequence[PushRequest]) -> list[PushResult]:
        if not requests:
            return []
        pushed = await self._db.write(lambda c: q.push(c, automation_type, requests, now()))
        if pushed.signal:
            dupes = sum(1 for r in pushed.results if not r.queued)
            self._watcher.wake(automation_type, pushed.ready, pushed.signal, len(requests) - dupes)
        return pushed.results

    async def _take(
        self,
        automation_type: str,
        k: int,
        visibility_seconds: float,
        default_max_attempts: int,
    ) -> Taken:
        reserved: q.Reserved = await self._db.write(
            lambda c: q.reserve(
                c,
                automation_type,
                k=k,
                visibility_seconds=visibility_seconds,
                default_max_attempts=default_max_attempts,
                now=now(),
            )
        )
        if len(reserved.reservations) >= k:
            self._watcher.wake(automation_type, 1)  # there may be more: one more looks
        return Taken(reserved.reservations, reserved.next_due, reserved.signal, reserved.expired)

    async def _wait_for_work(self, automation_type: str, signal: int, seconds: float) -> bool:
        return await self._watcher.wait(automation_type, signal, seconds)

    async def ack(
        self,
        automation_type: str,
        leases: Sequence[tuple[str, str]],
        *,
        worker_id: str | None = None,
    ) -> list[bool]:
        if not leases:
            return []
        # An ack may give a saturated group its budget back (the signal moves).
        return await write_waking(
            self._db,
            self._watcher,
            automation_type,
            lambda c: q.ack(c, automation_type, leases, now(), worker_id),
        )

    async def nack(
        self,
        automation_type: str,
        task_id: str,
        token: str,
        *,
        delay_seconds: float,
        error: str | None = None,
        traceback: str | None = None,
        dead: bool = False,
        worker_id: str | None = None,
        started_at: float | None = None,
    ) -> NackOutcome:
        return await write_waking(
            self._db,
            self._watcher,
            automation_type,
            lambda c: q.nack(
                c,
                automation_type,
                task_id,
                token,
                delay_seconds=delay_seconds,
                error=error,
                traceback=traceback,
                dead=dead,
                now=now(),
                worker_id=worker_id,
                started_at=started_at,
            ),
        )

    async def release(self, automation_type: str, task_id: str, token: str) -> bool:
        done = await self._db.write(lambda c: q.release(c, automation_type, task_id, token, now()))
        if done:
            self._watcher.wake(automation_type, 1)
        return done

    async def extend(
        self, automation_type: str, task_id: str, token: str, visibility_seconds: float
    ) -> LeaseStatus:
        return await self._db.write(
            lambda c: q.extend(c, automation_type, task_id, token, visibility_seconds, now())
        )

    async def mark_started(
        self,
        automation_type: str,
        leases: Sequence[tuple[str, str]],
        *,
        worker_id: str | None = None,
    ) -> list[bool]:
        if not leases:
            return []
        return await self._db.write(
            lambda c: q.mark_started(c, automation_type, leases, now(), worker_id)
        )

    async def sweep(self, automation_type: str) -> int:
        requeued = await self._db.write(lambda c: q.sweep(c, automation_type, now()))
        if requeued:
            self._watcher.wake(automation_type, requeued)
        return requeued

    async def dead_peek(self, automation_type: str, n: int = 50) -> list[TaskBody]:
        return await self._db.read(lambda c: qa.dead_peek(c, automation_type, n))

    async def dead_replay(
        self, automation_type: str, *, n: int | None = None, task_ids: Sequence[str] | None = None
    ) -> int:
        replayed = await self._db.write(
            lambda c: qa.dead_replay(c, automation_type, n=n, task_ids=task_ids, now=now())
        )
        if replayed:
            self._watcher.wake(automation_type, replayed)
        return replayed

    async def dead_clear(self, automation_type: str) -> int:
        return await self._db.write(lambda c: qa.dead_clear(c, automation_type))

    async def depths(self, automation_type: str) -> QueueDepths:
        return await self._db.read(lambda c: qa.depths(c, automation_type, now()))

    async def state(self, automation_type: str, task_id: str) -> TaskInfo:
        return await self._db.read(lambda c: qa.task_state(c, automation_type, task_id, now()))

    async def cancel(self, automation_type: str, task_id: str) -> CancelOutcome:
        return await self._db.write(lambda c: qa.cancel(c, automation_type, task_id, now()))
