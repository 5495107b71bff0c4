"""Several real processes on one SQLite file: exactly-once draining, crash recovery."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from fleet.backends import open_backend
from fleet.backends.sqlite.schema import SCHEMA_VERSION, read_version
from tests.sqlite.helpers import TYPE, executions, push_many, spawn, url_for, wait_all
from tests.support.waits import until

pytestmark = pytest.mark.slow


def _all_ready(logs: list[Path]) -> bool:
    return all(Path(f"{log}.ready").exists() for log in logs)


async def test_four_processes_execute_10000_tasks_exactly_once(tmp_path: Path) -> None:
    url = url_for(tmp_path / "fleet.db")
    backend = await open_backend(url)
    try:
        ids = await push_many(backend, 10_000)
        logs = [tmp_path / f"exec-{i}.txt" for i in range(4)]
        go = tmp_path / "go"
        procs = [spawn("drain", url, TYPE, str(log), f"--go={go}") for log in logs]
        # All four start draining at once: a process that started late could
        # otherwise find the queue already empty.

        def ready() -> bool:
            assert all(p.poll() is None for p in procs), "a drain exited before starting"
            return _all_ready(logs)

        await until(ready, timeout=60, interval=0.01, what="the drains to start")
        go.touch()
        assert await wait_all(procs) == [0, 0, 0, 0]

        done = executions(logs)
        per_task = Counter(task_id for task_id, _ in done)
        assert len(done) == 10_000
        assert set(per_task) == set(ids)
        assert max(per_task.values()) == 1
        # Every process took a share: the file really was contended.
        assert all(log.exists() and log.stat().st_size > 0 for log in logs)
        depths = await backend.queues.depths(TYPE)
        assert (depths.pending, depths.processing, depths.dead) == (0, 0, 0)
        assert depths.counters.completed == 10_000
    finally:
        await backend.close()


async def test_sigkilled_worker_loses_nothing(tmp_path: Path) -> None:
    url = url_for(tmp_path / "fleet.db")
    backend = await open_backend(url)
    try:
        ids = await push_many(backend, 1000)
        victim_log, survivor_log = tmp_path / "victim.txt", tmp_path / "survivor.txt"
        # Visibility 1 s; once 100 tasks are logged the victim holds its batch un-acked
        # until it is killed, so the kill always lands mid-batch.
        victim = spawn("drain", url, TYPE, str(victim_log), "1.0", "0.01", "100")
        await until(
            lambda: victim_log.exists() and len(victim_log.read_text().splitlines()) >= 100,
            timeout=20,
            interval=0.01,
            what="the victim's progress",
        )
        victim.send_signal(signal.SIGKILL)
        await asyncio.to_thread(victim.wait)
        assert victim.returncode == -signal.SIGKILL

        held = await backend.queues.depths(TYPE)
        assert held.processing > 0, "the victim held no reservation when killed"
        survivor = spawn("drain", url, TYPE, str(survivor_log), "30", "--sweep")
        assert await wait_all([survivor]) == [0]

        by_victim = executions([victim_log])
        by_survivor = executions([survivor_log])
        victim_ids = {t for t, _ in by_victim}
        survivor_ids = {t for t, _ in by_survivor}
        assert victim_ids | survivor_ids == set(ids)
        assert len(by_survivor) == len(survivor_ids), "survivor ran a task twice"
        redone = victim_ids & survivor_ids
        # Only the batch the victim held comes back, as a second attempt.
        assert 0 < len(redone) <= held.processing
        assert all(attempt == 2 for t, attempt in by_survivor if t in redone)
        depths = await backend.queues.depths(TYPE)
        assert (depths.pending, depths.processing, depths.scheduled) == (0, 0, 0)
        assert depths.counters.completed == 1000
        assert {(await backend.queues.state(TYPE, t)).state for t in redone} == {"done"}
    finally:
        await backend.close()


async def test_processes_opening_a_new_file_at_once_create_one_schema(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "fleet.db"
    url = url_for(path)
    procs = [spawn("open", url) for _ in range(4)]
    assert await wait_all(procs) == [0, 0, 0, 0]
    conn = sqlite3.connect(path)
    try:
        assert read_version(conn) == SCHEMA_VERSION
    finally:
        conn.close()


async def test_pool_claims_and_counters_are_exclusive_across_processes(tmp_path: Path) -> None:
    url = url_for(tmp_path / "fleet.db")
    backend = await open_backend(url)
    try:
        items = {await backend.pools.put("cookies", {"n": i}, {"site": "a"}) for i in range(300)}
        logs = [tmp_path / f"claims-{i}.txt" for i in range(4)]
        procs = [spawn("prims", url, "cookies", str(log), "100") for log in logs]
        assert await wait_all(procs) == [0, 0, 0, 0]
        claimed = [line for log in logs if log.exists() for line in log.read_text().split()]
        assert sorted(claimed) == sorted(items)  # each item went to exactly one process
        assert await backend.counters.get("hits") == 400
    finally:
        await backend.close()
