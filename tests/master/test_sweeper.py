"""The sweeper: expired reservations come back, and only one of two masters sweeps."""

from __future__ import annotations

from fleet.backends import open_backend
from fleet.core.records import PushRequest, TaskBody
from fleet.master.services.sweeper import LOCK_NAME, Sweeper
from tests.master.conftest import settings_for, start_in_process, wait_for
from tests.master.plugins import SCRAPE


async def test_two_masters_one_sweeper_and_failover(sqlite_url: str) -> None:
    settings = settings_for(sqlite_url, sweep_seconds=0.1)
    first, life1 = await start_in_process(settings)
    second, life2 = await start_in_process(settings)
    s1: Sweeper = first.app.state.fleet.sweeper
    s2: Sweeper = second.app.state.fleet.sweeper
    running = {id(s1): (first, life1), id(s2): (second, life2)}
    try:
        await wait_for(lambda: _true(s1.sweeps + s2.sweeps >= 4))
        assert s1.leader != s2.leader
        leader, follower = (s1, s2) if s1.leader else (s2, s1)
        follower_sweeps = follower.sweeps
        # A reservation past its deadline is re-queued by the leader's sweep.
        backend = first.backend
        await backend.queues.push(
            SCRAPE, [PushRequest(body=TaskBody(id="t1", payload={"url": "u"}))]
        )
        await backend.queues.reserve(SCRAPE, k=1, visibility_seconds=0.05)

        async def requeued() -> bool:
            return (await backend.queues.state(SCRAPE, "t1")).state == "queued"

        await wait_for(requeued)
        assert leader.last is not None
        assert follower.sweeps == follower_sweeps == 0
        # The leader stops (releasing the lock): the other master takes over.
        inproc, lifespan = running.pop(id(leader))
        await inproc.client.aclose()
        await lifespan.__aexit__(None, None, None)
        await wait_for(lambda: _true(follower.leader and follower.sweeps > 0))
    finally:
        for inproc, lifespan in running.values():
            await inproc.client.aclose()
            await lifespan.__aexit__(None, None, None)


async def _true(value: bool) -> bool:
    return value


async def test_sweeper_waits_for_an_expired_lock_of_a_dead_master(sqlite_url: str) -> None:
    backend = await open_backend(sqlite_url)
    try:
        # A master that died holding the lock: nobody renews it.
        assert await backend.locks.acquire(LOCK_NAME, "dead-master", 0.3)
        sweeper = Sweeper(backend, period=0.1)
        assert await sweeper.tick() is None
        await wait_for(lambda: _ticked(sweeper))
        assert sweeper.leader
        await backend.pools.put("p", {"x": 1}, {}, ttl_seconds=0.01)
        await wait_for(lambda: _pruned(sweeper))
    finally:
        await backend.close()


async def _ticked(sweeper: Sweeper) -> bool:
    return await sweeper.tick() is not None


async def _pruned(sweeper: Sweeper) -> bool:
    report = await sweeper.tick()
    return report is not None and report.pool_items_pruned == 1
