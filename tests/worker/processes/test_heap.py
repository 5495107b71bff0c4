"""``fleet worker`` freezes the objects its imports left and raises the young
generation's threshold (``fleet/heap.py``), as ``FLEET_GC_THRESHOLD`` says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fleet.backends.base import Backend
from fleet.heap import DEFAULT_THRESHOLD
from tests.worker.procs import WorkerProcess, fleet_env
from tests.worker.support import push, wait_until

pytestmark = pytest.mark.slow

T = "wt-heap"
PLUGIN = "tests.plugins_fixture.heapinfo"


@pytest.mark.parametrize(
    ("env", "gen0"),
    [
        ({}, DEFAULT_THRESHOLD),
        ({"FLEET_GC_THRESHOLD": "0"}, 700),
        ({"FLEET_GC_THRESHOLD": "2500"}, 2500),
    ],
)
async def test_the_worker_settles_its_heap(
    url: str,
    backend: Backend,
    tmp_path: Path,
    workers: list[WorkerProcess],
    env: dict[str, str],
    gen0: int,
) -> None:
    w = WorkerProcess(url, PLUGIN, T, "heap-1", tmp_path, env=env)
    workers.append(w)
    await push(backend, T, {"n": 1})

    async def ran() -> bool:
        assert w.proc.poll() is None, w.log()
        return await backend.counters.get("wt-heap:frozen") == 1

    await wait_until(ran, timeout=30, what="the task ran")
    assert await backend.counters.get("wt-heap:gen0") == gen0


def test_a_bad_threshold_is_a_clean_usage_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "fleet", "worker", "--plugin", PLUGIN, "--backend", "memory://"],
        env=fleet_env(FLEET_GC_THRESHOLD="lots"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "invalid environment: FLEET_GC_THRESHOLD" in proc.stderr
    assert "Traceback" not in proc.stderr and "lots" not in proc.stderr
