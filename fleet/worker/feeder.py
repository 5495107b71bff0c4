"""One reserver per batch type that hands tasks to idle slots.

Idle slots wait in :meth:`Feeder.get`; the feeder reserves as many tasks as
there are waiting slots in one blocking backend call, so a busy worker takes
tasks k at a time and an idle one makes one blocking call every few seconds
instead of one per slot. It never reserves more tasks than there are slots
waiting for them; a task whose slot went away meanwhile is given back with
``release`` (attempt refunded, head of its tier). A failing reserve is
retried with backoff whatever it raised; the loop never dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable

from fleet.backends.base import Backend
from fleet.backends.records import Reservation
from fleet.worker.backoff import backoff_delay

log = logging.getLogger("fleet.worker.feeder")


class Feeder:
    """Reserves tasks of one type on demand.

    Args:
        backend: The backend.
        automation_type: The batch type.
        lease_params: Returns ``(visibility_seconds, default_max_attempts)`` from the
            current config at each reserve.
        block_seconds: Longest single blocking reserve.
        max_batch: Most tasks taken in one reserve call.
        linger_seconds: How long a reserve waits for more idle slots while the
            queue is busy (the previous reserve got all it asked for).
    """

    def __init__(
        self,
        backend: Backend,
        automation_type: str,
        lease_params: Callable[[], tuple[float, int]],
        *,
        block_seconds: float = 5.0,
        max_batch: int = 100,
        linger_seconds: float = 0.001,
    ) -> None:
        self._backend = backend
        self._type = automation_type
        self._params = lease_params
        self._block = block_seconds
        self._max_batch = max_batch
        self._linger = linger_seconds
        self._waiters: deque[asyncio.Future[Reservation | None]] = deque()
        self._demand = asyncio.Event()
        self._closed = False
        self._task: asyncio.Task[None] | None = None
        self._releases: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        if self._task is None and not self._closed:
            self._task = asyncio.create_task(self._loop(), name=f"feeder:{self._type}")

    async def get(self) -> Reservation | None:
        """The next task for the calling slot; None once the feeder is closed.

        Cancelling the caller while it waits loses no task.
        """
        if self._closed:
            return None
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

    def _live_waiters(self) -> int:
        while self._waiters and self._waiters[0].done():
            self._waiters.popleft()
        return sum(1 for f in self._waiters if not f.done())

    async def _loop(self) -> None:
        failures = 0
        saturated = False
        while not self._closed:
            await self._demand.wait()
            # While the queue has more than we take (the last reserve was filled),
            # wait a moment so slots finishing meanwhile share one reserve call:
            # a busy worker makes fewer, larger calls. An idle worker (the last
            # reserve came back short) reserves at once, so latency is untouched.
            await asyncio.sleep(self._linger if saturated else 0)
            want = self._live_waiters()
            if want == 0:
                self._demand.clear()
                continue
            visibility, max_attempts = self._params()
            try:
                got = await self._backend.reserve(
                    self._type,
                    k=min(want, self._max_batch),
                    visibility_seconds=visibility,
                    timeout=self._block,
                    default_max_attempts=max_attempts,
                )
            except Exception as exc:
                failures += 1
                delay = backoff_delay(failures, base=0.2, cap=10.0)
                log.warning("%s: reserve failed (%s); retrying in %.1fs", self._type, exc, delay)
                await asyncio.sleep(delay)
                continue
            failures = 0
            saturated = len(got) >= min(want, self._max_batch)
            self._hand_out(got)

    def _hand_out(self, got: list[Reservation]) -> None:
        left: list[Reservation] = []
        for res in got:
            while self._waiters and self._waiters[0].done():
                self._waiters.popleft()
            if self._waiters:
                self._waiters.popleft().set_result(res)
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
                    await self._backend.release(self._type, res.body.id, res.token)
                except Exception as exc:
                    log.warning("%s: could not give back task %s: %s", self._type, res.body.id, exc)

        task = asyncio.create_task(release(), name=f"feeder-release:{self._type}")
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    async def close(self) -> None:
        """Stop reserving; waiting slots get None. Cancelling a blocked reserve
        loses no task (backend contract)."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
        if self._releases:
            await asyncio.gather(*list(self._releases), return_exceptions=True)
