"""One reserver per batch type that hands tasks to idle slots.

Idle slots wait in :meth:`Feeder.get`; the feeder reserves as many tasks as
there are waiting slots in one blocking backend call, so a busy worker takes
tasks k at a time and an idle one makes one blocking call every few seconds
instead of one per slot. A task whose slot went away meanwhile is given back
with ``release`` (attempt refunded, head of its tier). A failing reserve is
retried with backoff whatever it raised; the loop never dies.

Prefetch: only while the queue is busy (the previous reserve got all it asked
for), the feeder also takes up to ``prefetch()`` tasks more than the slots
waiting, so a slot that finishes takes its next task at once instead of waiting
a round trip. Such a task is held at most ``hold_seconds``: if no slot wants it
by then (the worker drains, shrinks or stops) it is given back. An idle worker
never holds a task it has no slot for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace

from fleet.core.backoff import backoff_delay
from fleet.core.cancelling import cancel_and_wait
from fleet.core.capabilities import TaskQueues
from fleet.core.outage import OutageLog, is_outage
from fleet.core.records import LeaseStatus, Reservation

log = logging.getLogger("fleet.worker.feeder")


class Feeder:
    """Reserves tasks of one type on demand.

    Args:
        queues: The backend's task queues.
        automation_type: The batch type.
        lease_params: Returns ``(visibility_seconds, default_max_attempts)`` from the
            current config at each reserve.
        block_seconds: Longest single blocking reserve.
        max_batch: Most tasks taken in one reserve call.
        linger_seconds: How long a reserve waits for more idle slots while the
            queue is busy (the previous reserve got all it asked for); 0: one
            loop turn.
        prefetch: Returns how many tasks to hold ahead of the slots while the
            queue is busy (0: none).
        hold_seconds: Longest time a prefetched task waits for a slot.
    """

    def __init__(
        self,
        queues: TaskQueues,
        automation_type: str,
        lease_params: Callable[[], tuple[float, int]],
        *,
        block_seconds: float = 5.0,
        max_batch: int = 100,
        linger_seconds: float = 0.0,
        prefetch: Callable[[], int] = lambda: 0,
        hold_seconds: float = 0.5,
    ) -> None:
        self._queues = queues
        self._type = automation_type
        self._params = lease_params
        self._block = block_seconds
        self._max_batch = max_batch
        self._linger = linger_seconds
        self._prefetch = prefetch
        self._hold = hold_seconds
        #: Prefetched tasks and the monotonic time each was taken.
        self._held: deque[tuple[Reservation, float]] = deque()
        self._waiters: deque[asyncio.Future[Reservation | None]] = deque()
        self._demand = asyncio.Event()
        self._closed = False
        self._task: asyncio.Task[None] | None = None
        self._releases: set[asyncio.Task[None]] = set()
        self._outages = OutageLog(log)
        self._reserving = f"{automation_type}: reserve"
        self._giving_back = f"{automation_type}: give back"

    def start(self) -> None:
        if self._task is None and not self._closed:
            self._task = asyncio.create_task(self._loop(), name=f"feeder:{self._type}")

    async def get(self) -> Reservation | None:
        """The next task for the calling slot; None once the feeder is closed.

        Cancelling the caller while it waits loses no task.
        """
        if self._closed:
            return None
        if self._held:
            self._demand.set()  # refill while the queue is busy
            return self._held.popleft()[0]
        fut: asyncio.Future[Reservation | None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        self._demand.set()
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                res = fut.result()
                if res is not None:
                    self._give_back([res])
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(fut)
            raise

    @property
    def holding(self) -> int:
        """Tasks reserved ahead that no slot took yet."""
        return len(self._held)

    def _live_waiters(self) -> int:
        while self._waiters and self._waiters[0].done():
            self._waiters.popleft()
        return sum(1 for f in self._waiters if not f.done())

    async def _loop(self) -> None:
        failures = 0
        saturated = False
        while not self._closed:
            if self._held and not self._live_waiters():
                # A held task's lease must outlive its wait: the slot's lease
                # keeper first renews a third of the visibility after the start.
                hold = min(self._hold, self._params()[0] / 4)
                if not await self._wait_demand(self._held[0][1] + hold):
                    # Nobody took the held tasks in time: give them back.
                    self._give_back([res for res, _ in self._held])
                    self._held.clear()
                    saturated = False
                    continue
            else:
                await self._demand.wait()
            # One loop turn, so the slots that finished together share one reserve
            # call. A longer wait while busy (``linger_seconds``) makes fewer,
            # larger calls but caps the rate: at 10 slots a 1 ms linger held the
            # drain to ~7,000 tasks/s on Redis (bench/README.md, round four).
            await asyncio.sleep(self._linger if saturated else 0)
            self._serve_held()
            want = self._live_waiters()
            # Refill the held tasks once half of them were taken.
            ahead = self._prefetch()
            extra = ahead - len(self._held) if saturated and 2 * len(self._held) <= ahead else 0
            k = min(want + extra, self._max_batch)
            if k == 0:
                self._demand.clear()
                continue
            visibility, max_attempts = self._params()
            try:
                got = await self._queues.reserve(
                    self._type,
                    k=k,
                    visibility_seconds=visibility,
                    # Only a slot that waits is worth a blocking call.
                    timeout=self._block if want else 0.0,
                    default_max_attempts=max_attempts,
                )
            except Exception as exc:
                failures += 1
                delay = backoff_delay(failures, base=0.2, cap=10.0)
                if is_outage(exc):
                    self._outages.failed(self._reserving, exc)
                else:
                    log.warning(
                        "%s: reserve failed (%s); retrying in %.1fs", self._type, exc, delay
                    )
                await asyncio.sleep(delay)
                continue
            failures = 0
            self._outages.recovered(self._reserving)
            if got and self._params()[0] < visibility:
                got = await self._relet(got)
            saturated = len(got) >= k
            self._hand_out(got, hold=extra > 0)
            if not saturated and not self._live_waiters():
                # Only now: a slot may have asked while this call was out.
                self._demand.clear()

    async def _relet(self, got: list[Reservation]) -> list[Reservation]:
        """Cut the leases of ``got`` to the visibility the config now asks.

        A blocking reserve keeps the visibility it was called with while it waits:
        one called before a config shortened it (a worker's first reserve goes out
        before the fleet's config lands) would hold what it takes for the default
        300 s, so a kill of this worker before the first renewal would hold the task
        that long. Rare (only a config change during a wait), so one extend per task.
        """
        visibility = self._params()[0]
        out: list[Reservation] = []
        for res in got:
            try:
                status = await self._queues.extend(self._type, res.body.id, res.token, visibility)
            except Exception as exc:  # the slot's lease keeper renews it anyway
                log.info("%s: could not shorten a lease (%s)", self._type, exc)
                out.append(res)
                continue
            if status is not LeaseStatus.STALE:
                out.append(replace(res, deadline=time.time() + visibility))
        return out

    async def _wait_demand(self, until: float) -> bool:
        """Wait for a slot's demand until monotonic time ``until``; False on timeout."""
        try:
            async with asyncio.timeout(max(0.0, until - time.monotonic())):
                await self._demand.wait()
        except TimeoutError:
            return False
        return True

    def _serve_held(self) -> None:
        while self._held:
            while self._waiters and self._waiters[0].done():
                self._waiters.popleft()
            if not self._waiters:
                return
            self._waiters.popleft().set_result(self._held.popleft()[0])

    def _hand_out(self, got: list[Reservation], *, hold: bool = False) -> None:
        left: list[Reservation] = []
        taken = time.monotonic()
        for res in got:
            while self._waiters and self._waiters[0].done():
                self._waiters.popleft()
            if self._waiters:
                self._waiters.popleft().set_result(res)
            elif hold and not self._closed:
                self._held.append((res, taken))
            else:
                left.append(res)
        if left:
            self._give_back(left)

    def _give_back(self, reservations: list[Reservation]) -> None:
        # A slot left between the reserve and the hand-out: return the task at
        # once rather than let it sit until its lease runs out.
        async def release() -> None:
            for res in reservations:
                try:
                    await self._queues.release(self._type, res.body.id, res.token)
                    self._outages.recovered(self._giving_back)
                except Exception as exc:
                    # Not lost: its lease runs out and the sweeper re-queues it.
                    if is_outage(exc):
                        self._outages.failed(self._giving_back, exc)
                    else:
                        log.warning(
                            "%s: could not give back task %s: %s", self._type, res.body.id, exc
                        )

        task = asyncio.create_task(release(), name=f"feeder-release:{self._type}")
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    async def close(self) -> None:
        """Stop reserving; waiting slots get None. Cancelling a blocked reserve
        loses no task (backend contract)."""
        self._closed = True
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
        if self._held:
            self._give_back([res for res, _ in self._held])
            self._held.clear()
        if self._releases:
            await asyncio.gather(*list(self._releases), return_exceptions=True)
