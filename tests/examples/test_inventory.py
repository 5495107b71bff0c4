"""inventory-sync: one token refresh for many concurrent slots (lock + kv), counters, events."""

from __future__ import annotations

import asyncio

import pytest
from inventory_sync import (
    INFLIGHT,
    REFRESHED_TOPIC,
    REFRESHES,
    TOKEN_KEY,
    TOKEN_NS,
    InventorySync,
    StockCheck,
    StockLevel,
    TokenRejected,
)

from fleet.core import Stream, Task
from fleet.core.clock import ManualClock
from fleet.dev.demo_state import DemoSettings
from tests.examples.conftest import DemoSite, MakeCtx

LEVELS = Stream[StockLevel]("inventory-sync", payload=StockLevel)


def check(sku: str) -> Task[StockCheck]:
    return Task(id=sku, payload=StockCheck(sku=sku), automation_type="inventory-sync")


async def test_concurrent_slots_share_one_token_refresh(
    demo_site: DemoSite, make_ctx: MakeCtx
) -> None:
    api = f"{demo_site.url}/api"
    ctxs = [make_ctx(InventorySync, slot_id=i, api_url=api) for i in range(6)]
    refreshed = ctxs[0].events.subscribe(REFRESHED_TOPIC)
    first = asyncio.ensure_future(anext(refreshed))
    await asyncio.sleep(0.05)

    skus = [f"SKU-{i}" for i in range(6)]
    await asyncio.gather(
        *(InventorySync().run_one(check(s), c) for s, c in zip(skus, ctxs, strict=True))
    )

    assert demo_site.state.stats.tokens_issued == 1  # the lock let one slot refresh
    assert demo_site.state.stats.stock_served == 6
    ctx = ctxs[0]
    assert await ctx.counter(REFRESHES).get() == 1
    assert await ctx.counter(INFLIGHT).get() == 0  # every incr had its decr
    assert await ctx.kv(TOKEN_NS).get(TOKEN_KEY) is not None
    message = await asyncio.wait_for(first, 5)
    assert message == {"worker_id": ctx.worker_id, "refreshes": 1}
    levels = await ctx.stream(LEVELS).peek(n=10)
    assert sorted(e.payload.sku for e in levels) == skus
    assert {e.payload.sku: e.payload.quantity for e in levels} == {
        s: demo_site.state.stock(s) for s in skus
    }
    await refreshed.aclose()


@pytest.mark.parametrize("demo_settings", [DemoSettings(token_ttl_seconds=6.0)])
async def test_the_cached_token_expires_before_the_real_one(
    demo_site: DemoSite, make_ctx: MakeCtx, frozen: ManualClock
) -> None:
    ctx = make_ctx(InventorySync, api_url=f"{demo_site.url}/api")
    await InventorySync().run_one(check("A"), ctx)
    # Cached for expires_in - 5 = 1 s: after that the next task refreshes (the demo
    # site's own token, 6 s on its real clock, still holds).
    frozen.advance(1.2)
    await InventorySync().run_one(check("B"), ctx)
    assert demo_site.state.stats.tokens_issued == 2
    assert await ctx.counter(REFRESHES).get() == 2


async def test_a_revoked_token_is_forgotten_and_the_retry_refreshes(
    demo_site: DemoSite, make_ctx: MakeCtx
) -> None:
    ctx = make_ctx(InventorySync, api_url=f"{demo_site.url}/api")
    await InventorySync().run_one(check("A"), ctx)
    demo_site.state.tokens.clear()  # the API revokes every token early

    with pytest.raises(TokenRejected):
        await InventorySync().run_one(check("B"), ctx)
    assert await ctx.kv(TOKEN_NS).get(TOKEN_KEY) is None
    assert await ctx.counter(INFLIGHT).get() == 0

    await InventorySync().run_one(check("B"), ctx)  # the retry
    assert demo_site.state.stats.tokens_issued == 2
    assert [e.payload.sku for e in await ctx.stream(LEVELS).peek(n=10)] == ["A", "B"]
