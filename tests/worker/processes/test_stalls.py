"""Blocking code in ``run_one`` (issue 40, finding 9): a real ``fleet worker``
watches its event loop from a thread. A task that blocks the loop (``time.sleep``,
a CPU loop) past its ``timeout_seconds`` is recorded as timed out, a failed
attempt with the stack where it blocked, instead of ``done``; the worker logs each
stall once; a task that waits politely is untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.backends.base import Backend
from tests.worker.procs import WorkerProcess
from tests.worker.support import push, wait_until

pytestmark = pytest.mark.slow

T = "wt-blocker"
PLUGIN = "tests.plugins_fixture.blocker"


async def _ended(backend: Backend, task_id: str, w: WorkerProcess) -> str:
    state = ""

    async def ended() -> bool:
        nonlocal state
        assert w.proc.poll() is None, w.log()
        state = (await backend.queues.state(T, task_id)).state
        return state in ("done", "dead")

    await wait_until(ended, timeout=30, what=f"task {task_id} ended")
    return state


@pytest.mark.parametrize(("mode", "where"), [("sleep", "time.sleep"), ("spin", "spin(")])
async def test_a_task_that_blocks_the_loop_past_its_limit_times_out(
    url: str, backend: Backend, tmp_path: Path, workers: list[WorkerProcess], mode: str, where: str
) -> None:
    w = WorkerProcess(url, PLUGIN, T, f"stall-{mode}", tmp_path, env={"FLEET_STALL_SECONDS": "0.3"})
    workers.append(w)
    (polite,) = await push(backend, T, {"mode": "await", "seconds": 0.2})
    assert await _ended(backend, polite, w) == "done"
    (blocking,) = await push(backend, T, {"mode": mode, "seconds": 2.5})
    assert await _ended(backend, blocking, w) == "dead"  # max_attempts 1: a failed attempt
    info = await backend.queues.state(T, blocking)
    assert info.last_error is not None and info.last_error.startswith("TaskTimeout")
    assert "blocked the event loop for" in info.last_error
    assert info.traceback is not None and where in info.traceback
    assert "blocker.py" in info.traceback
    # one warning while it blocked (with the stack), one when it was over
    log = w.log()
    assert log.count("the event loop is blocked") == 1, log
    assert log.count("the event loop was blocked for") == 1, log
    assert f"{T}.run_one.{blocking}" in log  # the run that blocked it is named


async def test_a_short_block_within_the_limit_is_logged_not_failed(
    url: str, backend: Backend, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    w = WorkerProcess(url, PLUGIN, T, "stall-short", tmp_path, env={"FLEET_STALL_SECONDS": "0.3"})
    workers.append(w)
    (task_id,) = await push(backend, T, {"mode": "sleep", "seconds": 0.6})
    assert await _ended(backend, task_id, w) == "done"
    assert w.log().count("the event loop is blocked") == 1


async def test_the_watch_can_be_turned_off(
    url: str, backend: Backend, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    w = WorkerProcess(url, PLUGIN, T, "stall-off", tmp_path, env={"FLEET_STALL_SECONDS": "0"})
    workers.append(w)
    (task_id,) = await push(backend, T, {"mode": "sleep", "seconds": 1.5})
    assert await _ended(backend, task_id, w) == "done"  # what it was before the watch
    assert "the event loop is blocked" not in w.log()
