"""Schedules with real processes, on Redis and SQLite: two masters and two workers,
a schedule declared on the plugin firing every second.

* 10 s of ticks: 10 ± 1 distinct ticks, each run exactly once (the plugin's ledger),
  the declared schedule stored once;
* every master stopped: the ticks keep coming (a worker fires them);
* the firing worker killed with -9: the other one fires within a few seconds.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from tests.support.master_proc import MasterProcess
from tests.support.waits import until
from tests.worker.procs import ROOT, fleet_env
from tests.worker.support import state_of, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

TYPE = "sched-proc"
PLUGIN = "tests.scheduler.plugin"
FIRES = "fires the fleet's schedules"


@pytest.fixture(params=["redis", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fleet.db'}"
    url: str = request.getfixturevalue("redis_url")
    return url


def start_worker(wid: str, url: str, env: dict[str, str], log: Any) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "fleet", "--log-level", "INFO", "worker", "--plugin", PLUGIN]
    args += ["--type", TYPE, "--id", wid, "--backend", url]
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def ledger(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def tick_of(task_id: str) -> int:
    return int(task_id.rsplit(":", 1)[1])


async def ticks_ran(path: Path) -> list[int]:
    await asyncio.sleep(0)
    return sorted(tick_of(r["id"]) for r in ledger(path))


async def test_ticks_fire_once_whoever_is_up(url: str, tmp_path: Path) -> None:
    book = tmp_path / "ledger.jsonl"
    env = fleet_env(FLEET_SCHED_LEDGER=str(book), FLEET_ENTRY_POINTS="0")
    masters: list[MasterProcess] = []
    workers: dict[str, subprocess.Popen[bytes]] = {}
    logs: dict[str, Path] = {}
    handles: list[Any] = []
    b: Backend = await open_backend(url)
    try:
        for i in (1, 2):
            d = tmp_path / f"m{i}"
            d.mkdir()
            masters.append(MasterProcess(url, d, sweep_seconds=1.0))
        for wid in ("w1", "w2"):
            logs[wid] = tmp_path / f"{wid}.log"
            handles.append(logs[wid].open("wb"))
            workers[wid] = start_worker(wid, url, env, handles[-1])

        async def up() -> bool:
            for wid in workers:
                if (await state_of(b, TYPE, wid)).get("state") not in ("RUNNING", "IDLE"):
                    return False
            return bool(await ticks_ran(book))

        await wait_until(up, timeout=60, interval=0.2, what="workers up and a first tick")
        assert [r.id for r in await b.schedules.listing(TYPE)] == ["every-second"]  # stored once

        # 10 s with everyone up.
        first = (await ticks_ran(book))[0]
        await asyncio.sleep(10.6)
        window = [t for t in await ticks_ran(book) if first < t <= first + 10]
        print(f"\n10 s window: {len(window)} distinct ticks")
        assert 9 <= len(set(window)) <= 11

        # Every master stopped: the workers fire.
        for m in masters:
            m.proc.send_signal(signal.SIGTERM)
        for m in masters:
            m.proc.wait(20)
        stopped = time.time()
        await asyncio.sleep(4)
        after = [t for t in await ticks_ran(book) if t > stopped + 1]
        print(f"masters stopped: {len(after)} ticks in the next ~3 s")
        assert len(after) >= 2

        # Kill the firing worker: the other takes over within a few seconds.
        firing = [w for w in workers if FIRES in logs[w].read_text(errors="replace")]
        victim = firing[-1]
        workers[victim].send_signal(signal.SIGKILL)
        workers[victim].wait(10)
        killed = time.time()

        async def resumed() -> bool:
            return any(t > killed for t in await ticks_ran(book))

        await until(resumed, interval=0.2, what="a tick after the firing worker was killed")
        took = min(r["t"] for r in ledger(book) if tick_of(r["id"]) > killed) - killed
        print(f"killed {victim}: ticks again after {took:.1f} s")
        assert took < 6
        await asyncio.sleep(1.5)

        # Each tick ran exactly once, whoever fired it.
        runs = Counter(r["id"] for r in ledger(book))
        assert max(runs.values()) == 1, [k for k, v in runs.items() if v > 1]
    finally:
        await b.close()
        for p in workers.values():
            if p.poll() is None:
                p.kill()
                p.wait(10)
        for h in handles:
            h.close()
        for m in masters:
            m.close()
