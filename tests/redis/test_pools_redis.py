"""Pool indexes on Redis: multi-field filters, cleanup, and claim cost that does
not grow with the pool (counted in Redis commands, not timed)."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from fleet.backends.redis import RedisBackend
from fleet.core.clock import ManualClock


async def fill(rb: RedisBackend, name: str, n: int) -> None:
    sem = asyncio.Semaphore(50)

    async def put(i: int) -> None:
        async with sem:
            tags = {"site": f"s{i % 5}", "region": "eu" if i % 2 else "us"}
            await rb.pools.put(name, {"i": i}, tags, ttl_seconds=1000 + i)

    await asyncio.gather(*(put(i) for i in range(n)))


async def script_commands(raw: aioredis.Redis) -> int:
    info = await raw.info("stats")
    return int(info["total_commands_processed"])


async def test_where_on_several_fields(rb: RedisBackend) -> None:
    await fill(rb, "p", 40)
    got = await rb.pools.claim("p", where={"site": "s3", "region": "eu"}, strategy="freshest")
    assert got is not None
    assert got.item.tags == {"site": "s3", "region": "eu"}
    assert got.item.payload == {"i": 33}  # the freshest (largest ttl) matching item
    oldest = await rb.pools.claim("p", where={"region": "eu", "site": "s3"}, strategy="oldest")
    assert oldest is not None and oldest.item.payload == {"i": 3}
    assert await rb.pools.size("p", where={"site": "s3", "region": "eu"}) == 2
    listed = await rb.pools.items("p", where={"site": "s3", "region": "us"}, n=10)
    assert [it.payload["i"] for it in listed] == [38, 28, 18, 8]
    assert await rb.pools.claim("p", where={"site": "s3", "region": "mars"}) is None
    assert await rb.pools.claim("p", where={"site": "nowhere"}) is None


async def test_indexes_are_cleaned_up(
    rb: RedisBackend, raw: aioredis.Redis, frozen: ManualClock
) -> None:
    await fill(rb, "p", 10)
    short = await rb.pools.put("p", 1, {"site": "s0"}, ttl_seconds=1.0)
    claim = await rb.pools.claim("p", where={"site": "s1"})
    assert claim is not None
    assert await rb.pools.evict("p", claim.item.id, claim.token)
    frozen.advance(1.1)
    assert await rb.pools.prune("p") == 1
    assert await raw.hexists("fleet:pool:p", short) == 0
    for item in await rb.pools.items("p", n=100):
        assert await rb.pools.remove("p", item.id)
    assert await raw.keys("fleet:pool:p*") == []
    assert await rb.pools.names() == []


async def test_claim_runs_out_and_comes_back(
    rb: RedisBackend, raw: aioredis.Redis, frozen: ManualClock
) -> None:
    item = await rb.pools.put("p", {"c": 1}, {})
    claim = await rb.pools.claim("p", hold_seconds=0.5)
    assert claim is not None and await rb.pools.claim("p") is None
    frozen.advance(0.6)
    again = await rb.pools.claim("p")
    assert again is not None and again.item.id == item
    assert not await rb.pools.release("p", item, claim.token)
    assert await raw.get(f"fleet:pool:p:claim:{item}") == again.token


async def test_claim_cost_does_not_grow_with_the_pool(
    rb: RedisBackend, raw: aioredis.Redis
) -> None:
    await fill(rb, "small", 20)
    await fill(rb, "big", 3000)
    costs: dict[str, list[int]] = {}
    for name in ("small", "big"):
        for where in (None, {"site": "s2"}, {"site": "s2", "region": "us"}):
            before = await script_commands(raw)
            claim = await rb.pools.claim(name, where=where)
            after = await script_commands(raw)
            assert claim is not None
            await rb.pools.release(name, claim.item.id, claim.token)
            costs.setdefault(name, []).append(after - before)
    assert costs["big"] == costs["small"], costs
    assert max(costs["big"]) < 40


async def test_prune_and_drop_work_in_bounded_chunks(
    rb: RedisBackend, raw: aioredis.Redis, monkeypatch: pytest.MonkeyPatch, frozen: ManualClock
) -> None:
    from fleet.backends.redis import pools as redis_pools

    monkeypatch.setattr(redis_pools, "POOL_CHUNK", 7)
    await asyncio.gather(*(rb.pools.put("p", i, {"k": i % 3}) for i in range(20)))
    # Long enough that no put prunes an earlier one on its way (puts prune too).
    await asyncio.gather(*(rb.pools.put("p", i, {"k": i % 3}, ttl_seconds=1.5) for i in range(30)))
    frozen.advance(1.6)
    assert await rb.pools.prune("p") == 30
    assert (await rb.pools.stats("p")).total == 20
    claim = await rb.pools.claim("p")
    assert claim is not None
    assert await rb.pools.drop("p") == 20
    assert await raw.keys("fleet:pool:p*") == []
    assert await rb.pools.names() == []
