"""``fleet worker --exit-when-idle SECONDS`` as a real process (SQLite and Redis): it
takes the work waiting at its start at once, keeps running while a task runs longer
than SECONDS, then exits 0 with every task done once and nothing left in flight."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from fleet.backends.base import Backend
from tests.worker.procs import WorkerProcess
from tests.worker.support import push, push_config, state_of, wait_until

E = "wt-echo"
ECHO = "tests.plugins_fixture.echo"
IDLE = 1.5

pytestmark = pytest.mark.slow


async def test_exit_when_idle_drains_and_exits_0(
    backend: Backend, url: str, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    await push_config(backend, E, {"slots": 4}, ["idle-1"])
    # One task runs longer than the idle limit: a busy slot is not "nothing to do".
    ids = await push(backend, E, {"n": 0, "sleep": IDLE + 1.0})
    ids += await push(backend, E, *[{"n": i, "sleep": 0.05} for i in range(1, 20)])
    w = WorkerProcess(url, ECHO, E, "idle-1", tmp_path, more_args=["--exit-when-idle", str(IDLE)])
    workers.append(w)

    async def up() -> bool:
        assert w.proc.poll() is None, w.log()
        return (await state_of(backend, E, "idle-1")).get("state") == "RUNNING"

    await wait_until(up, timeout=30, interval=0.02, what="RUNNING")
    seen_up = time.monotonic()

    async def first_taken() -> bool:
        return await backend.counters.get(f"wt-echo:runs:{ids[0]}") > 0

    await wait_until(first_taken, timeout=5, interval=0.02, what="the first task taken")
    assert time.monotonic() - seen_up < 1.0, "work waiting at the start was not taken at once"
    started = time.monotonic()
    assert w.wait(30) == 0, w.log()
    # It waited for the long task, then for IDLE seconds of nothing.
    assert time.monotonic() - started >= IDLE + 1.0 - 0.2
    assert "nothing to do for 1.5s: exiting" in w.log()
    for tid in ids:
        assert (await backend.queues.state(E, tid)).state == "done"
        assert await backend.counters.get(f"wt-echo:runs:{tid}") == 1
    depths = await backend.queues.depths(E)
    assert (depths.pending, depths.processing) == (0, 0)
    assert (await state_of(backend, E, "idle-1")).get("state") == "STOPPED"


async def test_a_worker_with_work_does_not_exit(
    backend: Backend, url: str, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    # Tasks arriving more often than the idle limit keep it running.
    await push_config(backend, E, {"slots": 1}, ["idle-2"])
    w = WorkerProcess(url, ECHO, E, "idle-2", tmp_path, more_args=["--exit-when-idle", "1"])
    workers.append(w)
    ids: list[str] = []
    for i in range(6):
        ids += await push(backend, E, {"n": i, "sleep": 0.05})
        await asyncio.sleep(0.5)
        assert w.proc.poll() is None, w.log()
    assert w.wait(30) == 0, w.log()
    for tid in ids:
        assert (await backend.queues.state(E, tid)).state == "done"
