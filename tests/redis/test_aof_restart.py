"""With AOF on, every piece of Fleet state survives a Redis restart and still works."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fleet.backends.redis import RedisBackend
from fleet.core.clock import ManualClock
from fleet.core.records import PushRequest, TaskBody
from tests.support.redis_server import REDIS_BIN, RedisServer

pytestmark = pytest.mark.skipif(REDIS_BIN is None, reason="redis-server not installed")


@pytest.fixture
def aof_server() -> Iterator[RedisServer]:
    srv = RedisServer(aof=True)
    srv.start()
    yield srv
    srv.cleanup()


def req(task_id: str, priority: int = 0, delay: float = 0.0, key: str | None = None) -> PushRequest:
    body = TaskBody(id=task_id, payload={"id": task_id}, priority=priority, max_attempts=3)
    return PushRequest(body, delay, idempotency_key=key)


async def test_everything_survives_an_aof_restart(
    aof_server: RedisServer, frozen: ManualClock
) -> None:
    b = RedisBackend(aof_server.url)
    await b.connect()
    try:
        # Queues: every tier, a processing lease, a scheduled retry, a delayed task, the DLQ.
        await b.queues.push("t", [req("leased", 9)])
        leased = (await b.queues.reserve("t", visibility_seconds=600))[0]
        await b.queues.push("t", [req("retry", 9)])
        retry = (await b.queues.reserve("t"))[0]
        assert await b.queues.nack("t", "retry", retry.token, delay_seconds=0.8) == "retry"
        await b.queues.push("t", [req("doomed", 9)])
        doomed = (await b.queues.reserve("t"))[0]
        assert await b.queues.nack(
            "t", "doomed", doomed.token, delay_seconds=0, dead=True, error="x"
        )
        await b.queues.push("t", [req("hi", 5), req("norm"), req("lo", -5)])
        await b.queues.push("t", [req("idem", key="once"), req("later", delay=0.8)])
        # Pools, primitives, config, workers.
        a = await b.pools.put("cookies", {"c": "a"}, {"site": "a.com"}, ttl_seconds=600)
        await b.pools.put("cookies", {"c": "b"}, {"site": "b.com"})
        held = await b.pools.claim("cookies", where={"site": "a.com"}, hold_seconds=600)
        assert held is not None and held.item.id == a
        await b.kv.set("ns", "k", "v")
        await b.counters.incr("hits", 41)
        await b.configs.set("t", {"slots": 4})
        await b.configs.set("t", {"slots": 8}, worker_id="w1")
        for _ in range(3):
            await b.configs.next_generation("t")
        await b.workers.register("t", "w1", {"host": "h1"})
        assert await b.configs.put_desired("t", "w1", {"slots": 8}, 3)
        await b.catalog.put("t", {"config": {"type": "object"}})
        before = await b.queues.depths("t")

        aof_server.restart()

        after = await b.queues.depths("t")
        assert after.counters == before.counters
        assert after.to_dict()["pending"] == before.to_dict()["pending"]
        assert (after.processing, after.scheduled, after.dead) == (
            before.processing,
            before.scheduled,
            before.dead,
        )
        assert before.high == 1 and before.normal == 2 and before.low == 1
        assert before.processing == 1 and before.scheduled == 2 and before.dead == 1
        # Leases taken before the restart still hold and can be acked.
        assert await b.queues.ack("t", [("leased", leased.token)]) == [True]
        # Idempotency keys survive.
        again = await b.queues.push("t", [req("idem-2", key="once")])
        assert again[0].duplicate and again[0].task_id == "idem"
        # Order survives: high, then normal FIFO, then low; due retries come back.
        frozen.advance(0.9)
        got = await b.queues.reserve("t", k=10)
        ids = [r.body.id for r in got]
        assert ids == ["hi", "retry", "norm", "idem", "later", "lo"]
        assert next(r for r in got if r.body.id == "retry").body.attempt == 2
        assert all(await b.queues.ack("t", [(r.body.id, r.token) for r in got]))
        assert await b.queues.dead_replay("t") == 1
        replayed = await b.queues.reserve("t")
        assert replayed[0].body.id == "doomed" and replayed[0].body.last_error == "x"
        # Pools: the claim still holds; the other item is claimable; release works.
        assert await b.pools.claim("cookies", where={"site": "a.com"}) is None
        other = await b.pools.claim("cookies")
        assert other is not None and other.item.payload == {"c": "b"}
        assert await b.pools.release("cookies", a, held.token)
        assert (await b.pools.stats("cookies")).total == 2
        # Primitives, config and generations.
        assert await b.kv.get("ns", "k") == "v"
        assert await b.counters.incr("hits") == 42
        assert await b.configs.get("t") == {"slots": 4}
        assert await b.configs.get("t", "w1") == {"slots": 8}
        assert await b.configs.next_generation("t") == 4
        assert await b.configs.desired("t", "w1") == ({"slots": 8}, 3)
        assert not await b.configs.put_desired("t", "w1", {"slots": 1}, 3)
        assert await b.workers.ids("t") == ["w1"]
        assert await b.catalog.get("t") == {"config": {"type": "object"}}
    finally:
        await b.close()


async def test_groups_survive_an_aof_restart(aof_server: RedisServer) -> None:
    from fleet.core.flow import GroupLimits, GroupSettings

    b = RedisBackend(aof_server.url)
    await b.connect()
    try:
        grouped = [
            PushRequest(TaskBody(id=f"g{i}", payload={}, max_attempts=3, group="shop"))
            for i in range(4)
        ]
        await b.queues.push("t", grouped)
        await b.groups.set("t", "shop", GroupSettings(concurrency=1, rate="1/m"))
        await b.groups.set("t", "quiet", GroupSettings(paused=True))
        assert await b.groups.set_defaults("t", GroupLimits.of(7, "2/s"), gen=3)
        (first,) = await b.queues.reserve("t", k=10)
        assert await b.groups.throttle("t", first.body.id, first.token, retry_after=600)
        before = await b.groups.page("t")
        assert [g.name for g in before.groups] == ["quiet", "shop"]
    finally:
        await b.close()
    aof_server.restart()
    b = RedisBackend(aof_server.url)
    await b.connect()
    try:
        after = await b.groups.page("t")
        assert after == before
        shop = after.groups[1]
        assert shop.settings == GroupSettings(concurrency=1, rate="1/m")
        assert shop.pending == 4 and shop.throttled_until is not None
        # Still held by its throttle after the restart; a reset lets it go again.
        assert await b.groups.defaults("t") == (GroupLimits.of(7, "2/s"), 3)
        assert await b.groups.set_defaults("t", GroupLimits(), gen=4)
        assert await b.queues.reserve("t", k=10) == []
        await b.groups.reset("t", "shop")
        assert [r.body.id for r in await b.queues.reserve("t", k=10)] == ["g0", "g1", "g2", "g3"]
    finally:
        await b.close()
