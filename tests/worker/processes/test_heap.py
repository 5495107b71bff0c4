"""``fleet worker`` keeps the collector off while it imports and starts, then
freezes the objects its imports left and raises the young generation's threshold
(``fleet/heap.py``), as ``FLEET_GC_THRESHOLD`` says; other commands get the
collector back before their own code runs."""

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
    seen_at_import = tmp_path / "heap-at-import"
    w = WorkerProcess(
        url, PLUGIN, T, "heap-1", tmp_path, env={**env, "FLEET_TEST_HEAP_FILE": str(seen_at_import)}
    )
    workers.append(w)
    await push(backend, T, {"n": 1})

    async def ran() -> bool:
        assert w.proc.poll() is None, w.log()
        return await backend.counters.get("wt-heap:frozen") == 1

    await wait_until(ran, timeout=30, what="the task ran")
    assert await backend.counters.get("wt-heap:gen0") == gen0
    # held while the plugins were imported, running again once settled
    assert seen_at_import.read_text(encoding="utf-8").split()[2] == "0"
    assert await backend.counters.get("wt-heap:enabled") == 1


@pytest.mark.parametrize("entry", [["-m", "fleet"], ["-c", "from fleet.cli import run; run()"]])
def test_a_command_that_does_not_settle_gets_the_collector_back(
    tmp_path: Path, entry: list[str]
) -> None:
    """``fleet plugins`` imports the plugin in its own code: the collector runs there."""
    seen = tmp_path / "heap"
    proc = subprocess.run(
        [sys.executable, *entry, "plugins", "--plugin", PLUGIN],
        env=fleet_env(FLEET_TEST_HEAP_FILE=str(seen)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    threshold, frozen, enabled = seen.read_text(encoding="utf-8").split()
    assert enabled == "1" and frozen == "0" and threshold == "700"


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
