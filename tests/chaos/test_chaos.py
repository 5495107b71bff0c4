"""The chaos suite: real workers, a real master, a real backend, and faults.

Every scenario is bounded and stops by itself; it counts executions per task from the
plugin's own ledger and asserts 0 lost, every duplicate explained by a kill before the
ack, and exactly the expected dead letters. CI runs the short version (part of the
suite); ``make chaos`` the long one (``FLEET_CHAOS_LONG=1``) and prints the table.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import time

import pytest
import redis

from fleet.backends import open_backend
from tests.chaos.conftest import RESULTS
from tests.chaos.harness import (
    TYPE,
    VISIBILITY,
    ChaosFleet,
    scale,
    submit,
    verdict,
    wait_settled,
)
from tests.chaos.tcp_proxy import TcpProxy
from tests.support.redis_server import RedisServer
from tests.worker.support import state_of, wait_until

pytestmark = [pytest.mark.chaos, pytest.mark.slow, pytest.mark.timeout(300)]


def kind(url: str) -> str:
    return "redis" if url.startswith("redis") else "sqlite"


async def workers_up(fleet: ChaosFleet, *ids: str) -> None:
    async with await open_backend(fleet.url) as b:

        async def up() -> bool:
            for wid in ids:
                state = await state_of(b, TYPE, wid)
                proc = fleet.workers[wid].proc
                if state.get("state") not in ("RUNNING", "IDLE"):
                    return False
                if proc is None or state.get("pid") != str(proc.pid):
                    return False  # still the record of the process before it
            return True

        await wait_until(up, timeout=60, interval=0.2, what=f"workers {ids} up")


def assert_clean(v: object, *, expect_dead: int = 0) -> None:
    from tests.chaos.harness import Verdict

    assert isinstance(v, Verdict)
    RESULTS.append(v)
    assert v.lost == 0, v
    assert v.unexplained == [], v.unexplained
    assert v.dead == expect_dead, v


async def test_worker_kill9_loop(fleet: ChaosFleet) -> None:
    """Workers killed with -9 again and again mid-drain, restarted under their ids."""
    await fleet.configure()
    fleet.start_master()
    for wid in ("a", "b"):
        fleet.add_worker(wid)
    await workers_up(fleet, "a", "b")
    rng = random.Random(7)
    async with await open_backend(fleet.url) as b:
        # About 8 s of work for 8 slots (80 s in the long run): the kills land mid-drain.
        n = scale(400, 4000)
        ids = await submit(b, [{"n": i, "ms": rng.randint(60, 260)} for i in range(n)])
        for _ in range(scale(3, 10)):
            await asyncio.sleep(rng.uniform(0.8, 1.6))
            victim = fleet.workers[rng.choice(["a", "b"])]
            victim.kill9()
            victim.start()
        last_kill = time.monotonic()
        done, dead, _ = await wait_settled(b, ids, timeout=VISIBILITY * 6 + 60)
    assert_clean(
        verdict("worker kill -9 loop", kind(fleet.url), fleet, ids, done, dead,
                time.monotonic() - last_kill)
    )  # fmt: skip


async def test_sigterm_drain_mid_run(fleet: ChaosFleet) -> None:
    """A worker told to stop mid-drain gives its unfinished tasks back: no duplicate."""
    await fleet.configure()
    fleet.start_master()
    for wid in ("a", "b"):
        fleet.add_worker(wid)
    await workers_up(fleet, "a", "b")
    async with await open_backend(fleet.url) as b:
        ids = await submit(b, [{"n": i, "ms": 150} for i in range(scale(200, 2000))])
        for _ in range(scale(2, 6)):
            await asyncio.sleep(0.8)
            w = fleet.workers["a"]
            assert w.sigterm() == 0
            w.start()
            await workers_up(fleet, "a")  # its signal handlers are in place again
        stopped = time.monotonic()
        done, dead, _ = await wait_settled(b, ids, timeout=120)
    v = verdict("SIGTERM drain", kind(fleet.url), fleet, ids, done, dead,
                time.monotonic() - stopped)  # fmt: skip
    assert_clean(v)
    assert v.duplicates == 0  # a graceful stop finishes or hands back, never abandons


@pytest.mark.parametrize("chaos_url", ["redis"], indirect=True)
async def test_redis_kill9_and_restart_with_aof(fleet: ChaosFleet, aof_redis: RedisServer) -> None:
    """Redis killed with -9 mid-drain and restarted from its AOF: the fleet carries on."""
    await fleet.configure()
    fleet.start_master()
    for wid in ("a", "b"):
        fleet.add_worker(wid)
    await workers_up(fleet, "a", "b")
    async with await open_backend(fleet.url) as b:
        ids = await submit(b, [{"n": i, "ms": 20} for i in range(scale(400, 4000))])
    for _ in range(scale(2, 5)):
        await asyncio.sleep(1.0)
        aof_redis.stop(kill=True)
        await asyncio.sleep(1.5)
        aof_redis.start()
    restarted = time.monotonic()
    async with await open_backend(fleet.url) as b:
        done, dead, _ = await wait_settled(b, ids, timeout=VISIBILITY * 4 + 60)
    assert_clean(
        verdict("Redis kill -9 + AOF restart", "redis", fleet, ids, done, dead,
                time.monotonic() - restarted)
    )  # fmt: skip


async def test_backend_data_loss_heals(fleet: ChaosFleet) -> None:
    """FLUSHALL (Redis) or every table emptied (SQLite) under a running fleet: what
    was queued is gone by definition; the fleet heals and loses nothing submitted after."""
    await fleet.configure()
    fleet.start_master()
    fleet.add_worker("a")
    await workers_up(fleet, "a")
    async with await open_backend(fleet.url) as b:
        await submit(b, [{"n": i, "ms": 5} for i in range(50)])
        await asyncio.sleep(0.5)
        lost_at = time.monotonic()
        if fleet.url.startswith("redis"):
            client = redis.Redis.from_url(fleet.url)
            client.flushall()
            client.close()
        else:
            path = fleet.url.removeprefix("sqlite:///")
            with sqlite3.connect(path, timeout=10) as conn:
                names = [
                    r[0]
                    for r in conn.execute(
                        "SELECT name FROM sqlite_master WHERE type='table' AND name != 'meta'"
                    )
                ]
                for name in names:
                    conn.execute(f"DELETE FROM {name}")  # fmt: skip

        async def registered_again() -> bool:
            return await b.catalog.get(TYPE) is not None and "a" in await b.workers.ids(TYPE)

        await wait_until(registered_again, timeout=10, interval=0.1, what="the fleet to heal")
        healed = time.monotonic() - lost_at
        ids = await submit(b, [{"n": 1000 + i, "ms": 5} for i in range(scale(100, 1000))])
        done, dead, _ = await wait_settled(b, ids, timeout=60)
    assert healed < 5, healed
    assert_clean(verdict("data loss (FLUSHALL)", kind(fleet.url), fleet, ids, done, dead, healed))


@pytest.mark.parametrize("chaos_url", ["redis"], indirect=True)
async def test_network_cut_longer_than_the_visibility_timeout(
    fleet: ChaosFleet, aof_redis: RedisServer
) -> None:
    """Worker a's line to Redis is cut for longer than visibility_seconds while it runs
    long tasks: worker b takes them over, and a, once back, cancels its zombie attempts
    instead of finishing them beside b's (no task finished twice)."""
    proxy = TcpProxy(aof_redis.port)
    await proxy.start()
    try:
        await fleet.configure(slots=2)
        fleet.start_master()
        a = fleet.add_worker("a", url=f"redis://127.0.0.1:{proxy.port}/0")
        await workers_up(fleet, "a")
        async with await open_backend(fleet.url) as b:
            ids = await submit(b, [{"n": i, "ms": 25_000} for i in range(2)])

            async def both_started() -> bool:
                starts, _ = fleet.ledger.read()
                return all(tid in starts for tid in ids)

            await wait_until(both_started, timeout=20, interval=0.1, what="a to start both")
            fleet.add_worker("b")  # direct line; it waits for the tasks to come back
            await workers_up(fleet, "b")
            proxy.cut()
            await asyncio.sleep(VISIBILITY + 4)  # a's leases expire; the master sweeps
            proxy.restore()
            restored = time.monotonic()
            done, dead, _ = await wait_settled(b, ids, timeout=90)
        starts, _ = fleet.ledger.read()
        assert all(len(starts[t]) == 2 for t in ids), starts  # a's attempt, then b's
        assert "lease lost: cancelling the attempt still running" in a.log(), a.log()[-3000:]
        v = verdict("network cut > visibility", "redis", fleet, ids, done, dead,
                    time.monotonic() - restored)  # fmt: skip
        assert_clean(v)
        assert v.duplicates == 0  # the zombies were cancelled, not finished
    finally:
        await proxy.close()
