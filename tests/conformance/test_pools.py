"""Conformance: pools (put/upsert, claims, filters, strategies, expiry, admin)."""

from __future__ import annotations

import asyncio

from fleet.backends.base import Backend
from fleet.core.clock import ManualClock
from fleet.core.records import now

POOL = "conf-pool"


async def _put(backend: Backend, site: str = "a", ttl: float | None = None, **kw: object) -> str:
    return await backend.pools.put(
        POOL, {"cookie": f"c-{site}"}, {"site": site, "kind": "x"}, ttl_seconds=ttl, **kw
    )


async def test_put_then_claim_returns_item(backend: Backend) -> None:
    item_id = await _put(backend, ttl=60)
    claim = await backend.pools.claim(POOL, hold_seconds=30)
    assert claim is not None
    assert claim.item.id == item_id
    assert claim.item.payload == {"cookie": "c-a"}
    assert claim.item.tags == {"site": "a", "kind": "x"}
    assert claim.item.expires_at is not None and claim.item.expires_at > now() + 50
    assert claim.token
    assert now() + 25 < claim.lease_until <= now() + 31


async def test_claim_is_exclusive(backend: Backend) -> None:
    await _put(backend)
    first = await backend.pools.claim(POOL)
    assert first is not None
    assert await backend.pools.claim(POOL) is None
    assert await backend.pools.size(POOL) == 0
    assert await backend.pools.items(POOL) == []


async def test_concurrent_claims_get_distinct_items(backend: Backend) -> None:
    ids = {await _put(backend, site=f"s{i}") for i in range(10)}
    claims = await asyncio.gather(*(backend.pools.claim(POOL) for _ in range(15)))
    got = [c.item.id for c in claims if c is not None]
    assert sorted(got) == sorted(ids)


async def test_claim_on_empty_or_unknown_pool(backend: Backend) -> None:
    assert await backend.pools.claim("nothing-here") is None


async def test_where_filters_by_exact_tag_equality(backend: Backend) -> None:
    a = await _put(backend, site="a")
    b = await _put(backend, site="b")
    await backend.pools.put(POOL, {}, {"site": "b", "kind": "y"})
    assert await backend.pools.size(POOL, where={"site": "b"}) == 2
    assert await backend.pools.size(POOL, where={"site": "b", "kind": "x"}) == 1
    assert await backend.pools.size(POOL, where={"site": "zzz"}) == 0
    claim = await backend.pools.claim(POOL, where={"site": "a"})
    assert claim is not None and claim.item.id == a
    assert await backend.pools.claim(POOL, where={"site": "a"}) is None
    claim = await backend.pools.claim(POOL, where={"site": "b", "kind": "x"})
    assert claim is not None and claim.item.id == b
    listed = await backend.pools.items(POOL, where={"site": "b"})
    assert [i.tags["kind"] for i in listed] == ["y"]


async def test_where_values_keep_types_apart(backend: Backend) -> None:
    await backend.pools.put(POOL, {}, {"n": 1})
    await backend.pools.put(POOL, {}, {"n": "1"})
    await backend.pools.put(POOL, {}, {"n": True})
    assert await backend.pools.size(POOL, where={"n": 1}) == 1
    assert await backend.pools.size(POOL, where={"n": "1"}) == 1
    assert await backend.pools.size(POOL, where={"n": True}) == 1


async def test_freshest_and_oldest_strategies(backend: Backend) -> None:
    short = await _put(backend, ttl=30)
    never = await _put(backend, ttl=None)
    long = await _put(backend, ttl=300)
    mid = await _put(backend, ttl=100)
    order = []
    while (c := await backend.pools.claim(POOL, strategy="freshest")) is not None:
        order.append(c.item.id)
        assert await backend.pools.release(POOL, c.item.id, c.token)
        assert await backend.pools.remove(POOL, c.item.id)
    assert order == [never, long, mid, short]

    short = await _put(backend, ttl=30)
    never = await _put(backend, ttl=None)
    long = await _put(backend, ttl=300)
    order = []
    while (c := await backend.pools.claim(POOL, strategy="oldest")) is not None:
        order.append(c.item.id)
    assert order == [short, long, never]


async def test_random_strategy_returns_matching_items(backend: Backend) -> None:
    ids = {await _put(backend, site="r") for _ in range(6)}
    await _put(backend, site="other")
    got = set()
    for _ in range(6):
        c = await backend.pools.claim(POOL, where={"site": "r"}, strategy="random")
        assert c is not None
        got.add(c.item.id)
    assert got == ids
    assert await backend.pools.claim(POOL, where={"site": "r"}, strategy="random") is None


async def test_release_makes_item_claimable_and_stale_token_fails(backend: Backend) -> None:
    item_id = await _put(backend)
    c = await backend.pools.claim(POOL)
    assert c is not None
    assert not await backend.pools.release(POOL, item_id, "wrong")
    assert await backend.pools.release(POOL, item_id, c.token)
    assert not await backend.pools.release(POOL, item_id, c.token)
    c2 = await backend.pools.claim(POOL)
    assert c2 is not None and c2.item.id == item_id and c2.token != c.token
    # The first holder's late release/evict/extend cannot touch the new lease.
    assert not await backend.pools.release(POOL, item_id, c.token)
    assert not await backend.pools.evict(POOL, item_id, c.token)
    assert not await backend.pools.extend(POOL, item_id, c.token, 60)
    assert await backend.pools.claim(POOL) is None


async def test_evict_removes_for_good(backend: Backend) -> None:
    item_id = await _put(backend)
    c = await backend.pools.claim(POOL)
    assert c is not None
    assert not await backend.pools.evict(POOL, item_id, "wrong")
    assert await backend.pools.evict(POOL, item_id, c.token)
    assert (await backend.pools.stats(POOL)).total == 0
    assert not await backend.pools.remove(POOL, item_id)


async def test_lease_expiry_makes_item_claimable_again(
    backend: Backend, frozen: ManualClock
) -> None:
    item_id = await _put(backend)
    crashed = await backend.pools.claim(POOL, hold_seconds=0.4)
    assert crashed is not None
    assert await backend.pools.claim(POOL) is None
    frozen.advance(0.5)
    assert await backend.pools.size(POOL) == 1
    again = await backend.pools.claim(POOL)
    assert again is not None and again.item.id == item_id
    assert not await backend.pools.release(POOL, item_id, crashed.token)
    assert not await backend.pools.extend(POOL, item_id, crashed.token, 10)


async def test_extend_keeps_the_lease(backend: Backend, frozen: ManualClock) -> None:
    item_id = await _put(backend)
    c = await backend.pools.claim(POOL, hold_seconds=0.4)
    assert c is not None
    assert await backend.pools.extend(POOL, item_id, c.token, 2)
    frozen.advance(0.5)
    assert await backend.pools.claim(POOL) is None
    assert await backend.pools.release(POOL, item_id, c.token)


async def test_expired_items_are_not_claimed_or_listed(
    backend: Backend, frozen: ManualClock
) -> None:
    await _put(backend, ttl=0.15)
    keep = await _put(backend, ttl=60)
    frozen.advance(0.25)
    assert await backend.pools.size(POOL) == 1
    assert [i.id for i in await backend.pools.items(POOL)] == [keep]
    c = await backend.pools.claim(POOL, strategy="oldest")
    assert c is not None and c.item.id == keep


async def test_upsert_replaces_and_keeps_claim(backend: Backend) -> None:
    item_id = await _put(backend, site="a")
    assert await _put(backend, site="b", item_id=item_id) == item_id
    c = await backend.pools.claim(POOL, where={"site": "b"})
    assert c is not None and c.item.id == item_id
    assert await backend.pools.claim(POOL, where={"site": "a"}) is None
    await backend.pools.put(POOL, {"cookie": "new"}, {"site": "c"}, item_id=item_id)
    assert await backend.pools.claim(POOL) is None  # still held by c
    assert await backend.pools.release(POOL, item_id, c.token)
    c2 = await backend.pools.claim(POOL, where={"site": "c"})
    assert c2 is not None and c2.item.payload == {"cookie": "new"}
    assert (await backend.pools.stats(POOL)).total == 1


async def test_put_with_new_item_id_inserts(backend: Backend) -> None:
    assert await _put(backend, item_id="my-id") == "my-id"
    assert [i.id for i in await backend.pools.items(POOL)] == ["my-id"]


async def test_list_freshest_first_and_limited(backend: Backend) -> None:
    a = await _put(backend, ttl=10)
    b = await _put(backend, ttl=100)
    c = await _put(backend, ttl=50)
    items = await backend.pools.items(POOL)
    assert [i.id for i in items] == [b, c, a]
    assert [i.id for i in await backend.pools.items(POOL, n=2)] == [b, c]
    assert items[0].created_at > 0
    # Listing claims nothing.
    assert await backend.pools.size(POOL) == 3


async def test_remove_whatever_the_claim(backend: Backend) -> None:
    item_id = await _put(backend)
    await backend.pools.claim(POOL)
    assert await backend.pools.remove(POOL, item_id)
    assert not await backend.pools.remove(POOL, item_id)
    assert await backend.pools.names() == []


async def test_prune_names_stats_drop(backend: Backend, frozen: ManualClock) -> None:
    await _put(backend, ttl=0.1)
    await _put(backend, ttl=0.1)
    await _put(backend, ttl=30)  # expiring soon
    held = await _put(backend, ttl=None)
    await backend.pools.put("other-pool", {}, {})
    c = await backend.pools.claim(POOL, where={"site": "a"}, strategy="freshest")
    assert c is not None and c.item.id == held
    frozen.advance(0.2)
    assert await backend.pools.prune(POOL) == 2
    assert await backend.pools.prune(POOL) == 0
    stats = await backend.pools.stats(POOL)
    assert (stats.name, stats.total, stats.available, stats.claimed) == (POOL, 2, 1, 1)
    assert stats.expiring_soon == 1
    assert await backend.pools.names() == sorted([POOL, "other-pool"])
    assert await backend.pools.drop(POOL) == 2
    assert await backend.pools.names() == ["other-pool"]
    empty = await backend.pools.stats(POOL)
    assert (empty.total, empty.available, empty.claimed, empty.expiring_soon) == (0, 0, 0, 0)
    assert await backend.pools.claim(POOL) is None
    assert await backend.pools.drop("never-existed") == 0


async def test_pools_are_independent(backend: Backend) -> None:
    await backend.pools.put("p1", {"v": 1}, {})
    assert await backend.pools.claim("p2") is None
    assert await backend.pools.size("p1") == 1


async def test_many_items_claim_release_cycles(backend: Backend) -> None:
    for i in range(200):
        await backend.pools.put(POOL, {"i": i}, {"site": f"s{i % 4}"}, ttl_seconds=100 + i)
    seen = set()
    for _ in range(50):
        c = await backend.pools.claim(POOL, where={"site": "s1"})
        assert c is not None and c.item.tags["site"] == "s1"
        seen.add(c.item.id)
    assert len(seen) == 50
    assert await backend.pools.size(POOL, where={"site": "s1"}) == 0
    assert await backend.pools.size(POOL) == 150
