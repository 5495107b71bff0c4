"""Keeping leases alive while tasks run, and acking finished tasks in batches.

Both serve every slot of one automation type: one ``LeaseKeeper`` renews the
leases of all running tasks (a no-op task never gets renewed, so fast tasks pay
nothing), and one ``AckBatcher`` turns the acks of many slots into one backend
call. A task's lease stays valid until its ack lands, so batching never lets a
finished task be handed out again.

The keeper also tells the backend which tasks started (``mark_started``): the
marks of every task started since its last call go out in one call, at once,
and no slot waits for it. A sweep charges the attempt of a lost lease only if
its mark landed; a task lost unstarted with its worker gets the attempt back.

The loops here catch every exception of a backend call, not only
``BackendError``: a failing call is retried, and the loop itself never dies.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from fleet.core.cancelling import cancel_and_wait
from fleet.core.capabilities import TaskQueues
from fleet.core.outage import OutageLog, is_outage
from fleet.core.records import LeaseStatus

log = logging.getLogger("fleet.worker.leases")


@dataclass(slots=True)
class Lease:
    """One running task's lease.

    Attributes:
        task_id: The task.
        token: The reservation token.
        visibility: Lease length (seconds) to renew to.
        renew_at: Monotonic time of the next renewal.
        on_cancel: Called with the task id when the backend says it was cancelled.
        on_lost: Called with the task id once the backend said the token is stale
            (the lease ran out and the task may run elsewhere); None: only log it.
        lost: True once the backend said the token is stale.
        marked: Resolved with the answer of the lease's start mark, for a slot
            that waits for it (:meth:`LeaseKeeper.mark_confirmed`).
    """

    task_id: str
    token: str
    visibility: float
    renew_at: float
    on_cancel: Callable[[str], object]
    on_lost: Callable[[str], object] | None = None
    lost: bool = False
    marked: asyncio.Future[bool] | None = None


def _ignore(_: str) -> None:
    return None


class LeaseKeeper:
    """Renews every tracked lease each ``visibility / 3`` seconds.

    Args:
        queues: The backend's task queues.
        automation_type: The type whose leases these are.
        tick: Longest sleep between checks (seconds).
        worker_id: This worker's id, kept with each start mark.
    """

    def __init__(
        self,
        queues: TaskQueues,
        automation_type: str,
        tick: float = 1.0,
        worker_id: str | None = None,
    ) -> None:
        self._queues = queues
        self._type = automation_type
        self._worker_id = worker_id
        self._tick = tick
        self._leases: dict[str, Lease] = {}
        self._task: asyncio.Task[None] | None = None
        self._outages = OutageLog(log)
        self._component = f"{automation_type}: lease renewal"
        #: Leases whose start mark is still to be sent.
        self._marks: list[Lease] = []
        self._mark_wake = asyncio.Event()
        self._marker: asyncio.Task[None] | None = None
        self._marking = f"{automation_type}: start marks"

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name=f"leases:{self._type}")
        if self._marker is None:
            self._marker = asyncio.create_task(self._send_marks(), name=f"marks:{self._type}")

    async def close(self) -> None:
        for task in (self._task, self._marker):
            if task is not None:
                await cancel_and_wait(task)
        self._task = self._marker = None
        for lease in self._marks:
            if lease.marked is not None and not lease.marked.done():
                lease.marked.set_result(False)
        self._marks.clear()

    def track(
        self,
        task_id: str,
        token: str,
        visibility: float,
        on_cancel: Callable[[str], object],
        on_lost: Callable[[str], object] | None = None,
        *,
        started: bool = True,
    ) -> Lease:
        """Start renewing a task's lease; returns the record (see ``Lease.lost``).

        ``started``: the task starts now, so its start mark is sent with the
        next batch (the caller does not wait for it). False: renew only; the
        caller marks it later with :meth:`mark_confirmed`.
        """
        lease = Lease(
            task_id, token, visibility, time.monotonic() + visibility / 3, on_cancel, on_lost
        )
        # Keyed by token, not task id: after a lost lease this worker may hold a
        # new lease of the same task while the old attempt still runs, and each
        # must be renewed (or found stale) on its own.
        self._leases[token] = lease
        if started:
            self._marks.append(lease)
            self._mark_wake.set()
        return lease

    async def mark_confirmed(self, lease: Lease, timeout: float = 5.0) -> bool | None:
        """Send a tracked lease's start mark and wait until the backend has it:
        True (marked), False (the token is stale: the lease is lost, and no
        longer tracked; ``on_lost`` is not called, the caller handles it), or
        None if no answer came within ``timeout`` (the mark stays queued)."""
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        lease.marked = fut
        self._marks.append(lease)
        self._mark_wake.set()
        try:
            async with asyncio.timeout(timeout):
                return await asyncio.shield(fut)
        except TimeoutError:
            return None

    def untrack(self, task_id: str, token: str | None = None) -> None:
        """Stop renewing (the task finished): the lease ``token``, or every
        lease of ``task_id`` when no token is given."""
        if token is not None:
            self._leases.pop(token, None)
            return
        for key in [k for k, lease in self._leases.items() if lease.task_id == task_id]:
            del self._leases[key]

    def hold_for_ack(self, token: str) -> None:
        """The task of lease ``token`` finished and its ack is on its way: keep
        renewing the lease until :meth:`untrack` (the ack landed), but a cancel or a
        loss no longer concerns any running attempt."""
        lease = self._leases.get(token)
        if lease is not None:
            lease.on_cancel = _ignore
            lease.on_lost = None

    def get(self, task_id: str) -> Lease | None:
        """The most recently tracked lease of a running task, if any."""
        found = None
        for lease in self._leases.values():
            if lease.task_id == task_id:
                found = lease
        return found

    async def _loop(self) -> None:
        while True:
            now = time.monotonic()
            due = [lease for lease in self._leases.values() if lease.renew_at <= now]
            for lease in due:
                await self._renew(lease)
            nxt = min((lease.renew_at for lease in self._leases.values()), default=now + self._tick)
            await asyncio.sleep(min(max(nxt - time.monotonic(), 0.01), self._tick))

    async def _send_marks(self) -> None:
        failures = 0
        while True:
            await self._mark_wake.wait()
            # One loop turn: the slots that start together share one call.
            await asyncio.sleep(0)
            self._mark_wake.clear()
            while self._marks:
                # A task that finished before its mark went out needs none: its
                # ack or nack settles the lease.
                batch: list[Lease] = []
                for m in self._marks:
                    if self._leases.get(m.token) is m:
                        batch.append(m)
                    elif m.marked is not None and not m.marked.done():
                        m.marked.set_result(False)
                self._marks = []
                if not batch:
                    break
                try:
                    results = await self._queues.mark_started(
                        self._type,
                        [(m.task_id, m.token) for m in batch],
                        worker_id=self._worker_id,
                    )
                except Exception as exc:
                    failures += 1
                    if is_outage(exc):
                        self._outages.failed(self._marking, exc)
                    else:
                        log.warning(
                            "%s: start marks of %d task(s) failed: %s", self._type, len(batch), exc
                        )
                    self._marks[:0] = batch
                    await asyncio.sleep(min(0.1 * 2**failures, 5.0))
                    continue
                failures = 0
                self._outages.recovered(self._marking)
                for lease, ok in zip(batch, results, strict=False):
                    waiter, lease.marked = lease.marked, None
                    if waiter is not None and not waiter.done():
                        waiter.set_result(ok)
                        if not ok:
                            lease.lost = True
                            self._leases.pop(lease.token, None)
                    elif not ok and self._leases.get(lease.token) is lease:
                        self._lost(lease)

    async def _renew(self, lease: Lease) -> None:
        try:
            status = await self._queues.extend(
                self._type, lease.task_id, lease.token, lease.visibility
            )
        except Exception as exc:
            # Try again soon: the lease still has two thirds of its time left.
            if is_outage(exc):
                self._outages.failed(self._component, exc)
            else:
                log.warning("%s: renewing task %s failed: %s", self._type, lease.task_id, exc)
            lease.renew_at = time.monotonic() + min(self._tick, lease.visibility / 10)
            return
        self._outages.recovered(self._component)
        if self._leases.get(lease.token) is not lease:
            return  # finished while we were renewing
        if status is LeaseStatus.STALE:
            self._lost(lease)
            return
        lease.renew_at = time.monotonic() + lease.visibility / 3
        if status is LeaseStatus.CANCELLED:
            lease.on_cancel(lease.task_id)

    def _lost(self, lease: Lease) -> None:
        """The backend said the lease's token is stale."""
        lease.lost = True
        self._leases.pop(lease.token, None)
        if lease.on_lost is not None:
            # The slot cancels the attempt still running (and logs it): the
            # task belongs to another lease now, its side effects must stop.
            lease.on_lost(lease.task_id)
        else:
            log.warning(
                "%s: lease of task %s was lost (it expired and was handed out again); "
                "this attempt's result will be refused",
                self._type,
                lease.task_id,
            )


class AckBatcher:
    """Collects ``(task_id, token)`` acks from all slots and sends them together.

    Args:
        queues: The backend's task queues.
        automation_type: The type of the tasks.
        on_stale: Called with the task id of every ack the backend refused.
        on_settled: Called with ``(task_id, token)`` of every ack the backend
            answered (accepted or refused): the lease keeper stops renewing it.
        linger_seconds: How long a busy batcher waits to gather more acks. The
            lease stays valid until the ack lands, so this only delays the
            ``done`` state by as much.
        worker_id: This worker's id (the record's last attempt names it).
    """

    def __init__(
        self,
        queues: TaskQueues,
        automation_type: str,
        on_stale: Callable[[str], None] | None = None,
        linger_seconds: float = 0.002,
        on_settled: Callable[[str, str], None] | None = None,
        worker_id: str | None = None,
    ) -> None:
        self._worker_id = worker_id
        self._on_settled = on_settled
        self._linger = linger_seconds
        self._queues = queues
        self._type = automation_type
        self._on_stale = on_stale
        self._pending: list[tuple[str, str]] = []
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._outages = OutageLog(log)
        self._component = f"{automation_type}: acks"

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name=f"acks:{self._type}")

    def ack(self, task_id: str, token: str) -> None:
        """Queue an ack; it is sent with the next batch."""
        self._pending.append((task_id, token))
        self._idle.clear()
        self._wake.set()

    async def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued ack was sent; False if ``timeout`` passed first."""
        if self._task is None:
            self.start()
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def close(self, timeout: float = 10.0) -> None:
        """Flush, then stop the sender."""
        await self.flush(timeout)
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    async def _loop(self) -> None:
        failures = 0
        busy = False
        while True:
            await self._wake.wait()
            # After a batch of several acks (a busy worker) wait a moment so the
            # next one gathers more; a lone ack goes out after one loop turn.
            await asyncio.sleep(self._linger if busy else 0)
            self._wake.clear()
            while self._pending:
                batch, self._pending = self._pending, []
                busy = len(batch) > 1
                try:
                    results = await self._queues.ack(self._type, batch, worker_id=self._worker_id)
                except Exception as exc:
                    failures += 1
                    if is_outage(exc):
                        self._outages.failed(self._component, exc)
                    else:
                        log.warning("%s: ack of %d task(s) failed: %s", self._type, len(batch), exc)
                    self._pending[:0] = batch
                    # Short: the leases of these tasks are held until the acks land.
                    await asyncio.sleep(min(0.1 * 2**failures, 1.0))
                    continue
                failures = 0
                self._outages.recovered(self._component)
                if self._on_settled is not None:
                    for task_id, token in batch:
                        self._on_settled(task_id, token)
                if self._on_stale is not None:
                    for (task_id, _), ok in zip(batch, results, strict=False):
                        if not ok:
                            self._on_stale(task_id)
            self._idle.set()
