"""Task queues of the memory backend (``backend.queues``): each type's
:class:`~fleet.backends.memory.queue.QueueState` (one synchronous step per call,
so atomic under asyncio) and the futures blocked reserves wait on."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from fleet.backends.memory.store import MemoryStore
from fleet.backends.memory.wait import resolve
from fleet.core.capabilities import TaskQueues
from fleet.core.capabilities.queues import Taken
from fleet.core.records import (
    CancelOutcome,
    LeaseStatus,
    NackOutcome,
    PushRequest,
    PushResult,
    QueueDepths,
    Reservation,
    TaskBody,
    TaskInfo,
    dumps,
    now,
)


class MemoryQueues(TaskQueues):
    """The queues of one store, as one backend instance sees them."""

    #: A take is one synchronous step: a cancel cannot cut it after it took tasks.
    take_outlives_cancel = False

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._is_closed = False
        self._waiting: set[asyncio.Future[None]] = set()

    @property
    def _closed(self) -> bool:
        return self._is_closed

    def open(self) -> None:
        """Serve again after :meth:`close` (a backend may be reconnected)."""
        self._is_closed = False

    def close(self) -> None:
        """Wake every blocked reserve of this instance; they return ``[]``."""
        self._is_closed = True
        for fut in list(self._waiting):
            resolve(fut)

    async def push(self, automation_type: str, requests: Sequence[PushRequest]) -> list[PushResult]:
        await asyncio.sleep(0)  # a yield point, as every networked backend has
        reqs = [r if _plain(r.body) else _copied(r) for r in requests]
        return self._store.queue(automation_type).state.push(reqs, now())

    async def _take(
        self,
        automation_type: str,
        k: int,
        visibility_seconds: float,
        default_max_attempts: int,
    ) -> Taken:
        await asyncio.sleep(0)
        queue = self._store.queue(automation_type)
        t = now()
        expired: list[TaskBody] = []
        taken = queue.state.take(k, visibility_seconds, default_max_attempts, t, expired)
        dropped = tuple((b.id, t - b.enqueued_at, b.ttl_seconds) for b in expired)
        return Taken([_delivered(r) for r in taken], queue.state.next_due(), expired=dropped)

    async def _wait_for_work(self, automation_type: str, signal: int, seconds: float) -> bool:
        queue = self._store.queue(automation_type)
        fut = queue.waiters.add()
        self._waiting.add(fut)
        try:
            done, _ = await asyncio.wait((fut,), timeout=seconds)
            return bool(done)
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                queue.waiters.wake(1)  # hand the wake-up we consumed to another reserver
            raise
        finally:
            self._waiting.discard(fut)
            queue.waiters.discard(fut)
            if not fut.done():
                fut.cancel()

    async def ack(self, automation_type: str, leases: Sequence[tuple[str, str]]) -> list[bool]:
        await asyncio.sleep(0)
        return self._store.queue(automation_type).state.ack(leases, now())

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
    ) -> NackOutcome:
        return self._store.queue(automation_type).state.nack(
            task_id,
            token,
            delay_seconds=delay_seconds,
            error=error,
            traceback=traceback,
            dead=dead,
            now=now(),
        )

    async def release(self, automation_type: str, task_id: str, token: str) -> bool:
        return self._store.queue(automation_type).state.release(task_id, token)

    async def extend(
        self, automation_type: str, task_id: str, token: str, visibility_seconds: float
    ) -> LeaseStatus:
        return self._store.queue(automation_type).state.extend(
            task_id, token, visibility_seconds, now()
        )

    async def mark_started(
        self, automation_type: str, leases: Sequence[tuple[str, str]]
    ) -> list[bool]:
        return self._store.queue(automation_type).state.mark_started(leases, now())

    async def sweep(self, automation_type: str) -> int:
        t = now()
        self._store.runs.prune(t)  # runs past their ttl or idle ttl
        return self._store.queue(automation_type).state.sweep(t)

    async def dead_peek(self, automation_type: str, n: int = 50) -> list[TaskBody]:
        return [_delivered_body(b) for b in self._store.queue(automation_type).state.dead_peek(n)]

    async def dead_replay(
        self, automation_type: str, *, n: int | None = None, task_ids: Sequence[str] | None = None
    ) -> int:
        return self._store.queue(automation_type).state.dead_replay(n, task_ids)

    async def dead_clear(self, automation_type: str) -> int:
        return self._store.queue(automation_type).state.dead_clear()

    async def depths(self, automation_type: str) -> QueueDepths:
        return self._store.queue(automation_type).state.depths(now())

    async def state(self, automation_type: str, task_id: str) -> TaskInfo:
        return self._store.queue(automation_type).state.task_state(task_id, now())

    async def cancel(self, automation_type: str, task_id: str) -> CancelOutcome:
        return self._store.queue(automation_type).state.cancel(task_id, now())


# ------------------------------------------------------------ copies
# Bodies cross the boundary as JSON copies, as with every real backend, so a
# caller that mutates a payload never mutates the stored task.


def _json(value: Any) -> Any:
    return json.loads(dumps(value))


def _plain(body: TaskBody) -> bool:
    return body.payload is None or isinstance(body.payload, str | int | float | bool)


def _copied(req: PushRequest) -> PushRequest:
    body = req.body.evolve(payload=_json(req.body.payload))
    return PushRequest(
        body, req.delay_seconds, req.idempotency_key, req.idempotency_ttl, req.unique_key
    )


def _delivered_body(body: TaskBody) -> TaskBody:
    return body if _plain(body) else body.evolve(payload=_json(body.payload))


def _delivered(res: Reservation) -> Reservation:
    return Reservation(_delivered_body(res.body), res.token, res.deadline)
