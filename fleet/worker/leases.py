"""Keeping leases alive while tasks run, and acking finished tasks in batches.

Both serve every slot of one automation type: one ``LeaseKeeper`` renews the
leases of all running tasks (a no-op task never gets renewed, so fast tasks pay
nothing), and one ``AckBatcher`` turns the acks of many slots into one backend
call. A task's lease stays valid until its ack lands, so batching never lets a
finished task be handed out again.

The loops here catch every exception of a backend call, not only
``BackendError``: a failing call is retried, and the loop itself never dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

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
    """

    task_id: str
    token: str
    visibility: float
    renew_at: float
    on_cancel: Callable[[str], object]
    on_lost: Callable[[str], object] | None = None
    lost: bool = False


class LeaseKeeper:
    """Renews every tracked lease each ``visibility / 3`` seconds.

    Args:
        backend: The backend.
        automation_type: The type whose leases these are.
        tick: Longest sleep between checks (seconds).
    """

    def __init__(self, backend: TaskQueues, automation_type: str, tick: float = 1.0) -> None:
        self._backend = backend
        self._type = automation_type
        self._tick = tick
        self._leases: dict[str, Lease] = {}
        self._task: asyncio.Task[None] | None = None
        self._outages = OutageLog(log)
        self._component = f"{automation_type}: lease renewal"

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name=f"leases:{self._type}")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def track(
        self,
        task_id: str,
        token: str,
        visibility: float,
        on_cancel: Callable[[str], object],
        on_lost: Callable[[str], object] | None = None,
    ) -> Lease:
        """Start renewing a task's lease; returns the record (see ``Lease.lost``)."""
        lease = Lease(
            task_id, token, visibility, time.monotonic() + visibility / 3, on_cancel, on_lost
        )
        # Keyed by token, not task id: after a lost lease this worker may hold a
        # new lease of the same task while the old attempt still runs, and each
        # must be renewed (or found stale) on its own.
        self._leases[token] = lease
        return lease

    def untrack(self, task_id: str, token: str | None = None) -> None:
        """Stop renewing (the task finished): the lease ``token``, or every
        lease of ``task_id`` when no token is given."""
        if token is not None:
            self._leases.pop(token, None)
            return
        for key in [k for k, lease in self._leases.items() if lease.task_id == task_id]:
            del self._leases[key]

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

    async def _renew(self, lease: Lease) -> None:
        try:
            status = await self._backend.extend(
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
            return
        lease.renew_at = time.monotonic() + lease.visibility / 3
        if status is LeaseStatus.CANCELLED:
            lease.on_cancel(lease.task_id)


class AckBatcher:
    """Collects ``(task_id, token)`` acks from all slots and sends them together.

    Args:
        backend: The backend.
        automation_type: The type of the tasks.
        on_stale: Called with the task id of every ack the backend refused.
        linger_seconds: How long a busy batcher waits to gather more acks. The
            lease stays valid until the ack lands, so this only delays the
            ``done`` state by as much.
    """

    def __init__(
        self,
        backend: TaskQueues,
        automation_type: str,
        on_stale: Callable[[str], None] | None = None,
        linger_seconds: float = 0.002,
    ) -> None:
        self._linger = linger_seconds
        self._backend = backend
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
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
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
                    results = await self._backend.ack(self._type, batch)
                except Exception as exc:
                    failures += 1
                    if is_outage(exc):
                        self._outages.failed(self._component, exc)
                    else:
                        log.warning("%s: ack of %d task(s) failed: %s", self._type, len(batch), exc)
                    self._pending[:0] = batch
                    await asyncio.sleep(min(0.1 * 2**failures, 5.0))
                    continue
                failures = 0
                self._outages.recovered(self._component)
                if self._on_stale is not None:
                    for (task_id, _), ok in zip(batch, results, strict=False):
                        if not ok:
                            self._on_stale(task_id)
            self._idle.set()
