"""Zombies stop: a slot whose lease was lost (the task was handed out again)
cancels the attempt still running, without acking or failing it, on every backend.

The lease is made stale the way a network cut longer than ``visibility_seconds``
makes it: its deadline passes (``extend`` to a moment from now), the sweeper
re-queues the task, and another reservation takes it. The old worker learns it
at its next renewal (a third of the visibility after the start).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from pydantic import BaseModel

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core import BaseConfig, BatchAutomation, Context, Task, register
from fleet.core.records import LeaseStatus
from fleet.master.services.metrics import MasterMetrics
from fleet.worker.agent import Worker
from tests.worker.support import push, running_worker, wait_until

T = "wt-zombie"
VISIBILITY = 10.0  # the smallest BaseConfig allows: the first renewal comes after 3.3 s
LOST = "lease lost: cancelling the attempt still running; another worker holds the task"

#: (event, worker id, attempt, unix time) of every step of every run, in order.
JOURNAL: list[tuple[str, str, int, float]] = []


class ZombieTask(BaseModel):
    #: Seconds attempt n runs (``holds[n - 1]``; 0 past the end of the list).
    holds: list[float] = [60.0]


@register(T)
class ZombieAutomation(BatchAutomation[BaseConfig]):
    TaskPayload = ZombieTask

    def __init__(self) -> None:
        self._running: dict[int, int] = {}  # slot -> attempt, for cleanup's journal line

    async def run_one(self, task: Task[Any], ctx: Context[BaseConfig]) -> None:
        self._running[ctx.slot_id] = task.attempt
        JOURNAL.append(("start", ctx.worker_id, task.attempt, time.time()))
        holds: list[float] = task.payload.holds
        try:
            if task.attempt <= len(holds):
                await asyncio.sleep(holds[task.attempt - 1])
            JOURNAL.append(("end", ctx.worker_id, task.attempt, time.time()))
        except asyncio.CancelledError:
            JOURNAL.append(("cancelled", ctx.worker_id, task.attempt, time.time()))
            raise

    async def cleanup(self, ctx: Context[BaseConfig]) -> None:
        attempt = self._running.pop(ctx.slot_id, 0)
        JOURNAL.append(("cleanup", ctx.worker_id, attempt, time.time()))


def seen(event: str, worker: str, attempt: int) -> Callable[[], bool]:
    return lambda: any(e[:3] == (event, worker, attempt) for e in JOURNAL)


def when(event: str, worker: str, attempt: int) -> float:
    return next(e[3] for e in JOURNAL if e[:3] == (event, worker, attempt))


@pytest.fixture(autouse=True)
def _fresh_journal() -> None:
    JOURNAL.clear()


@pytest.fixture
async def pair(backend_url: str) -> AsyncIterator[tuple[Backend, Backend]]:
    """Two backend instances on one store: one per worker, as two hosts have."""
    first = await open_backend(backend_url)
    second = await open_backend(backend_url)
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()


def spy_settlements(backend: Backend) -> list[tuple[str, str, str]]:
    """Record ``(call, task_id, token)`` of every ack, nack and release sent
    through ``backend`` (the instance's methods are wrapped, the class is not)."""
    calls: list[tuple[str, str, str]] = []
    ack, nack, release = backend.queues.ack, backend.queues.nack, backend.queues.release

    async def spy_ack(automation_type: str, leases: Any, **kw: Any) -> list[bool]:
        calls.extend(("ack", task_id, token) for task_id, token in leases)
        return await ack(automation_type, leases, **kw)

    async def spy_nack(automation_type: str, task_id: str, token: str, **kw: Any) -> Any:
        calls.append(("nack", task_id, token))
        return await nack(automation_type, task_id, token, **kw)

    async def spy_release(automation_type: str, task_id: str, token: str) -> bool:
        calls.append(("release", task_id, token))
        return await release(automation_type, task_id, token)

    backend.queues.ack = spy_ack  # type: ignore[method-assign]
    backend.queues.nack = spy_nack  # type: ignore[method-assign]
    backend.queues.release = spy_release  # type: ignore[method-assign]
    return calls


async def lose_lease(backend: Backend, worker: Worker, task_id: str) -> str:
    """Let the lease of ``task_id`` held by ``worker`` run out and have the sweeper
    re-queue the task; returns the lost token."""
    keeper = worker.runners[T].env.keeper
    assert keeper is not None
    lease = keeper.get(task_id)
    assert lease is not None
    status = await backend.queues.extend(T, task_id, lease.token, 0.001)  # the deadline passes...
    assert status is LeaseStatus.OK
    await asyncio.sleep(0.05)
    assert await backend.queues.sweep(T) == 1  # ...and the sweeper hands the task out again
    return lease.token


@pytest.mark.timeout(60)
async def test_a_zombie_is_cancelled_and_the_new_attempt_completes_once(
    pair: tuple[Backend, Backend], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="fleet.worker")
    b1, b2 = pair
    await b1.configs.set(T, {"slots": 1, "visibility_seconds": VISIBILITY})
    w1_calls = spy_settlements(b1)
    w2_calls = spy_settlements(b2)
    async with running_worker(b1, [ZombieAutomation], "w1") as w1:
        (tid,) = await push(b1, T, {"holds": [60.0]})
        await wait_until(seen("start", "w1", 1), what="attempt 1 running on w1")
        async with running_worker(b2, [ZombieAutomation], "w2"):
            # w2 idles in a blocking reserve; w1's only slot is busy, so it reserves nothing.
            lost_token = await lose_lease(b1, w1, tid)
            await wait_until(seen("end", "w2", 2), what="attempt 2 done on w2")
            # w1 hears "stale" at its next renewal and cancels the attempt it still runs.
            await wait_until(seen("cleanup", "w1", 1), timeout=15, what="zombie cleaned up")
            (warning,) = [r for r in caplog.records if LOST in r.getMessage()]
            assert warning.levelno == logging.WARNING
            assert f"{T}: task {tid} attempt 1: " in warning.getMessage()
            # Side effects stopped within a second of knowing.
            assert when("cancelled", "w1", 1) - warning.created < 1.0
            assert when("cleanup", "w1", 1) - warning.created < 1.0
            assert not seen("end", "w1", 1)()

            runner = w1.runners[T]
            assert runner.env.counters.zombies_cancelled == 1
            assert runner.env.counters.completed == 0 and runner.env.counters.failed == 0

            async def reported() -> bool:
                record = await b1.workers.get(T, "w1")
                stats = (record.stats or {}) if record is not None else {}
                return bool(stats.get("tasks", {}).get("zombies_cancelled") == 1)

            await wait_until(reported, what="zombies_cancelled in w1's stats frame")
            text = (await MasterMetrics().render(b1, heartbeat_seconds=0.2)).decode()
            assert f'fleet_worker_zombies_cancelled_total{{type="{T}",worker="w1"}} 1.0' in text
            assert f'fleet_worker_zombies_cancelled_total{{type="{T}",worker="w2"}} 0.0' in text

    # The stale attempt settled nothing; the new one was acked exactly once.
    assert w1_calls == []
    acks = [c for c in w2_calls if c[1] == tid]
    assert len(acks) == 1 and acks[0][0] == "ack" and acks[0][2] != lost_token
    assert (await b1.queues.state(T, tid)).state == "done"
    depths = await b1.queues.depths(T)
    assert depths.counters.completed == 1 and depths.counters.failed == 0
    assert depths.processing == 0 and depths.pending == 0
    assert [e[:3] for e in JOURNAL if e[0] == "start"] == [("start", "w1", 1), ("start", "w2", 2)]


@pytest.mark.timeout(60)
async def test_a_worker_that_gets_its_own_lost_task_back_keeps_both_leases_apart(
    pair: tuple[Backend, Backend], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="fleet.worker")
    b1, _ = pair
    await b1.configs.set(T, {"slots": 2, "visibility_seconds": VISIBILITY})
    calls = spy_settlements(b1)
    async with running_worker(b1, [ZombieAutomation], "w1") as w1:
        (tid,) = await push(b1, T, {"holds": [60.0, 5.0]})
        await wait_until(seen("start", "w1", 1), what="attempt 1 running")
        # The idle slot of the same worker takes the task again: two leases of one task.
        lost_token = await lose_lease(b1, w1, tid)
        await wait_until(seen("start", "w1", 2), what="attempt 2 running in the other slot")
        await wait_until(seen("cleanup", "w1", 1), timeout=15, what="zombie cleaned up")
        assert seen("cancelled", "w1", 1)()
        assert not seen("end", "w1", 2)()  # the new attempt runs on, untouched
        keeper = w1.runners[T].env.keeper
        assert keeper is not None
        live = keeper.get(tid)
        assert live is not None and live.token != lost_token and not live.lost

        async def done() -> bool:
            return (await b1.queues.state(T, tid)).state == "done"

        await wait_until(done, timeout=15, what="attempt 2 acked")
        assert w1.runners[T].env.counters.zombies_cancelled == 1
    assert [c for c in calls if c[1] == tid] == [("ack", tid, live.token)]
    # The worker's own "ack ... was refused" line (other tests' leftovers may log too).
    refused = [r for r in caplog.records if r.name.startswith("fleet.worker")]
    assert not [r for r in refused if "refused" in r.getMessage()]
    assert (await b1.queues.depths(T)).counters.completed == 1
