"""``?wait=`` served by shared pollers: one loop per automation type for task waits
and one for runs, however many requests wait.

Each loop reads, once a tick, the state of every task (or run) someone waits for,
all in one go and each id once, and hands the answer to the waits whose task ended.
A tick comes quickly after a wait joins (``FIRST`` seconds), then less often, up to
``EVERY``; a loop ends when nobody waits. A wait that is cancelled (its client left:
the route cancels it) or that times out leaves at once, so nothing is read for a
client that is gone. Owned by the master's lifespan (``MasterState.waits``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from fleet.backends.base import Backend
from fleet.core.cancelling import cancel_and_wait
from fleet.core.records import TaskInfo
from fleet.core.results import FINAL_STATES
from fleet.core.runs import OPEN_STATES, RunRecord

#: Seconds from a wait joining to the next read: quick, so short tasks answer fast.
FIRST = 0.02
#: Seconds between two reads at most (the gap doubles from ``FIRST`` up to it).
EVERY = 0.25

K = TypeVar("K")
V = TypeVar("V")


class Poller(Generic[K, V]):
    """One loop reading every waited key's value each tick.

    Args:
        read: The values of some keys, in their order (one call a tick).
        ended: Whether a value is the one its waits wait for.
        name: The loop's task name.
    """

    def __init__(
        self,
        read: Callable[[Sequence[K]], Awaitable[Sequence[V]]],
        ended: Callable[[V], bool],
        name: str,
    ) -> None:
        self._read = read
        self._ended = ended
        self._name = name
        self._waits: dict[K, set[asyncio.Future[V]]] = {}
        self._joined = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        #: Reads made (one per tick), for the tests and metrics.
        self.reads = 0

    @property
    def waiting(self) -> int:
        """Waits held now."""
        return sum(len(w) for w in self._waits.values())

    async def wait(self, key: K, timeout: float) -> V | None:
        """``key``'s value once it ended, or None after ``timeout`` seconds.

        Raises:
            BackendError: The tick's read failed (the waits of that tick get it).
        """
        future: asyncio.Future[V] = asyncio.get_running_loop().create_future()
        self._waits.setdefault(key, set()).add(future)
        self._joined.set()
        if self._loop_task is None or self._loop_task.done():
            self._loop_task = asyncio.create_task(self._run(), name=self._name)
        try:
            async with asyncio.timeout(timeout):
                return await future
        except TimeoutError:
            return None
        finally:
            held = self._waits.get(key)
            if held is not None:
                held.discard(future)
                if not held:
                    del self._waits[key]

    async def _run(self) -> None:
        pause = FIRST
        while self._waits:
            pause = await self._sleep(pause)
            keys = list(self._waits)
            if not keys:
                break
            self.reads += 1
            try:
                values = await self._read(keys)
            except Exception as exc:  # a BackendError: every wait of the tick gets it
                for key in keys:
                    for future in self._waits.get(key, ()):
                        if not future.done():
                            future.set_exception(exc)
                continue
            for key, value in zip(keys, values, strict=True):
                if self._ended(value):
                    for future in self._waits.get(key, ()):
                        if not future.done():
                            future.set_result(value)

    async def _sleep(self, pause: float) -> float:
        """Sleep ``pause`` seconds, cut to ``FIRST`` from when a wait joins; the
        next pause."""
        deadline = time.monotonic() + pause
        while True:
            self._joined.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                return min(pause * 2, EVERY)
            try:
                async with asyncio.timeout(left):
                    await self._joined.wait()
            except TimeoutError:
                continue
            deadline = min(deadline, time.monotonic() + FIRST)
            pause = FIRST

    async def close(self) -> None:
        if self._loop_task is not None:
            await cancel_and_wait(self._loop_task)
            self._loop_task = None


class Waits:
    """The master's shared waits: a :class:`Poller` per type for tasks, one for runs.

    Args:
        backend: What the pollers read.
    """

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._tasks: dict[str, Poller[str, TaskInfo]] = {}
        self._runs: Poller[str, RunRecord | None] = Poller(
            self._read_runs, _run_ended, "fleet-run-waits"
        )

    def tasks(self, automation_type: str) -> Poller[str, TaskInfo]:
        """The poller of ``automation_type``'s task waits (made on first use)."""
        poller = self._tasks.get(automation_type)
        if poller is None:

            async def read(task_ids: Sequence[str]) -> list[TaskInfo]:
                queues = self._backend.queues
                return list(
                    await asyncio.gather(*(queues.state(automation_type, t) for t in task_ids))
                )

            poller = Poller(read, _task_ended, f"fleet-task-waits-{automation_type}")
            self._tasks[automation_type] = poller
        return poller

    @property
    def runs(self) -> Poller[str, RunRecord | None]:
        """The poller of run waits."""
        return self._runs

    async def task(self, automation_type: str, task_id: str, timeout: float) -> TaskInfo | None:
        """The task's record once it ended (or is unknown); None after ``timeout``."""
        return await self.tasks(automation_type).wait(task_id, timeout)

    async def run(self, run_id: str, timeout: float) -> RunRecord | None:
        """The run's record once it ended; None after ``timeout`` or once it is gone
        (the caller reads it again to tell)."""
        return await self._runs.wait(run_id, timeout)

    async def _read_runs(self, run_ids: Sequence[str]) -> list[RunRecord | None]:
        runs = self._backend.runs
        return list(await asyncio.gather(*(runs.get(r) for r in run_ids)))

    async def close(self) -> None:
        """Stop every loop (the master is stopping)."""
        await self._runs.close()
        for poller in self._tasks.values():
            await poller.close()


def _task_ended(info: TaskInfo) -> bool:
    return info.state in FINAL_STATES or info.state == "unknown"


def _run_ended(record: RunRecord | None) -> bool:
    return record is None or record.state not in OPEN_STATES
