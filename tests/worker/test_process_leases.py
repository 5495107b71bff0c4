"""Leases across real processes on Redis: a worker killed with -9 mid-task
loses the task to another worker after the visibility deadline, while a task
running three times longer than ``visibility_seconds`` on a live worker is
never handed out twice (its slot renews the lease)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from tests.support.waits import until
from tests.worker.procs import WorkerProcess
from tests.worker.support import push, state_of, wait_until

E = "wt-echo"
VISIBILITY = 10.0  # the smallest BaseConfig allows


pytestmark = pytest.mark.slow


@pytest.fixture
async def backend(redis_url: str) -> AsyncIterator[Backend]:
    b = await open_backend(redis_url)
    try:
        yield b
    finally:
        await b.close()


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for w in started:
        w.close()


# Two worker starts and a 31 s task: past the default 60 s on a loaded machine.
@pytest.mark.timeout(150)
async def test_kill9_mid_task_and_long_task_runs_exactly_once(
    backend: Backend, redis_url: str, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    await backend.configs.set(E, {"visibility_seconds": VISIBILITY, "max_attempts": 3})
    await backend.configs.set(E, {"slots": 2}, "keeper")

    async def runs(task_id: str) -> int:
        return await backend.counters.get(f"wt-echo:runs:{task_id}")

    async def started(task_id: str) -> bool:
        return await runs(task_id) == 1

    async def up(wid: str) -> bool:
        return (await state_of(backend, E, wid)).get("state") == "RUNNING"

    # 1. the victim takes a task that would take a minute on its first attempt
    victim = WorkerProcess(redis_url, "tests.plugins_fixture.echo", E, "victim", tmp_path)
    workers.append(victim)
    await wait_until(lambda: up("victim"), timeout=30, what="victim up")
    (orphan,) = await push(backend, E, {"n": 1, "sleep_first": 60})
    await wait_until(lambda: started(orphan), timeout=30, what="orphan started on victim")

    # 2. the keeper takes a task lasting 3.1x the visibility timeout
    keeper = WorkerProcess(redis_url, "tests.plugins_fixture.echo", E, "keeper", tmp_path)
    workers.append(keeper)
    await wait_until(lambda: up("keeper"), timeout=30, what="keeper up")
    long_sleep = VISIBILITY * 3.1
    (long_,) = await push(backend, E, {"n": 2, "sleep": long_sleep})
    await wait_until(lambda: started(long_), timeout=30, what="long task started")
    long_started = time.monotonic()

    # 3. kill -9 the victim mid-task; sweep like the master does, all along
    victim.kill9()
    killed_at = time.monotonic()
    requeued_at: float | None = None

    async def swept_until_done() -> bool:
        nonlocal requeued_at
        if await backend.queues.sweep(E) and requeued_at is None:
            requeued_at = time.monotonic()
        return all([(await backend.queues.state(E, t)).state == "done" for t in (orphan, long_)])

    # Past the time allowed, the assertions below say what is missing.
    with contextlib.suppress(AssertionError):
        left = long_started + long_sleep + 10 - time.monotonic()
        await until(swept_until_done, timeout=left, interval=0.5)
    assert requeued_at is not None, "the orphan was never swept back"
    assert requeued_at - killed_at <= VISIBILITY + 2
    for tid in (orphan, long_):
        assert (await backend.queues.state(E, tid)).state == "done", keeper.log()
    assert await runs(orphan) == 2  # the killed attempt, then the keeper's
    assert await runs(long_) == 1  # renewed lease: never handed out again
    assert time.monotonic() - long_started >= long_sleep
    by_n = {e.payload["n"]: e.payload for e in await backend.streams.peek(E, 10)}
    assert by_n[1]["worker"] == "keeper" and by_n[1]["attempt"] == 2
    assert by_n[2]["worker"] == "keeper" and by_n[2]["attempt"] == 1
    assert (await backend.queues.depths(E)).processing == 0
