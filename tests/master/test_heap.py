"""``fleet master`` settles its garbage collector before it loads its plugins and
serves (``fleet/heap.py``), as ``FLEET_GC_THRESHOLD`` says."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.heap import DEFAULT_THRESHOLD
from tests.support.master_proc import MasterProcess

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("threshold", "gen0"), [(None, DEFAULT_THRESHOLD), ("3000", 3000)])
async def test_the_master_settles_its_heap(
    tmp_path: Path, threshold: str | None, gen0: int
) -> None:
    report = tmp_path / "heap.txt"
    env = {"FLEET_PLUGINS": "tests.plugins_fixture.heapinfo", "FLEET_TEST_HEAP_FILE": str(report)}
    if threshold is not None:
        env["FLEET_GC_THRESHOLD"] = threshold
    master = MasterProcess(f"sqlite:///{tmp_path / 'fleet.db'}", tmp_path, env=env)
    try:
        await master.wait_ready()
        seen_gen0, frozen, enabled = (int(x) for x in report.read_text(encoding="utf-8").split())
        assert seen_gen0 == gen0, master.log()
        assert frozen > 1000  # the master's imports (the plugin is imported after)
        assert enabled == 1  # held through the imports, running once settled
    finally:
        master.interrupt()
        master.close()
