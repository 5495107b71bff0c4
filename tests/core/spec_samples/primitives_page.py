"""The code samples of spec/primitives.md, inside async functions (plus stubs)."""
# ruff: noqa
from __future__ import annotations

from fleet.core import Context
from tests.core.spec_samples.contracts_page import COOKIE_POOL, SCRAPER_OUT, CfCookie, CfCookieTags
from tests.core.spec_samples.batch_page import SCRAPER, ScrapeTask


async def pools(ctx: Context) -> None:
    pool = ctx.pool(COOKIE_POOL)
    item_id = await pool.put(payload=CfCookie(cookies={}, user_agent="ua", proxy_url=None,
                                              site="example.com"),
                             tags=CfCookieTags(site="example.com"),
                             ttl_seconds=1800)            # -> str; item_id=... to upsert
    async with pool.where(site="example.com").claim(hold_seconds=60) as item:
        if item is None: ...                              # nothing claimable right now
        else:
            item.id, item.payload, item.tags, item.expires_at # payload/tags are P/T instances
            await item.release()   # give it back early (also done on leaving the block)
            await item.evict()     # remove it from the pool for good (e.g. the cookie is burnt)
            await item.extend(60)  # keep the lease longer
    await pool.list(n=50)      # unclaimed, unexpired items (optionally .where(...) first)
    await pool.size()          # count of unclaimed, unexpired items
    await pool.remove(item_id)


async def streams(ctx: Context, cursor: str | None) -> None:
    s = ctx.stream(SCRAPER_OUT)
    await s.pop(n=10)     # -> list[Entry]; destructive, competing consumers (ZPOPMIN)
    await s.peek(n=10)    # -> list[Entry]; oldest first, not removed
    await s.read(after=cursor, n=100)  # -> list[Entry]; non-destructive, for fan-out readers
    await s.length()


async def queues(ctx: Context) -> None:
    task_id = await ctx.submit(SCRAPER, ScrapeTask(url="https://x"), priority=5, task_id=None,
                               max_attempts=None, ttl_seconds=None, delay_seconds=None,
                               idempotency_key=None)


async def kv_lock_counter_events(ctx: Context, key: str, value: object) -> None:
    from pydantic import BaseModel

    class Model(BaseModel):
        x: int = 0

    kv = ctx.kv("scraper-inflight")
    await kv.set(key, value, ttl_seconds=None)   # value: JSON-able or a pydantic model
    await kv.setnx(key, value, ttl_seconds=None) # -> bool, True if it was set
    await kv.get(key, default=None)
    await kv.get_as(key, Model)                  # -> Model | None
    await kv.delete(key)

    async with ctx.lock("refresh-token", hold_seconds=30, wait_seconds=10) as acquired:
        if not acquired: ...   # waited wait_seconds without getting it

    c = ctx.counter("scraper:inflight")
    await c.incr(n=1); await c.decr(n=1); await c.get()
    await c.set(3); await c.reset()

    await ctx.events.publish("cookies.refilled", {"site": "example.com"})
    async for message in ctx.events.subscribe("cookies.refilled"):
        break

    ctx.metrics.incr("pages_fetched", 1)
    ctx.metrics.set("queue_lag_seconds", 3.2)
    ctx.metrics.observe("fetch_seconds", 0.41)

    ctx.proxy.url                  # current URL (same as ctx.proxy_url)
    await ctx.proxy.rotate()       # new exit (new sticky session id)
    await ctx.proxy.set_country("de")
    await ctx.proxy.report_bad("403 from target")  # rotate and remember
