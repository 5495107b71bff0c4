"""cf-cookie-harvester and cf-scraper against the real demo site, on the memory backend."""

from __future__ import annotations

import asyncio
import time

import pytest
from cf_contracts import (
    COOKIE_POOL,
    SCRAPER_OUT,
    CfCookie,
    CfCookieTags,
    HarvestRequest,
    ScrapeTask,
)
from cf_cookie_harvester import CookieHarvester, solve_challenge
from cf_scraper import CookieRejected, NoCookie, Scraper, UpstreamError

from fleet.backends.base import Backend
from fleet.core import Task
from fleet.core.clock import ManualClock
from fleet.dev.demo_state import pow_ok
from tests.examples.conftest import DemoSite, MakeCtx


def harvest_task(site: str) -> Task[HarvestRequest]:
    return Task(id="h1", payload=HarvestRequest(site=site), automation_type="cf-cookie-harvester")


def scrape_task(url: str, task_id: str = "s1") -> Task[ScrapeTask]:
    return Task(id=task_id, payload=ScrapeTask(url=url), automation_type="cf-scraper")


def test_solve_challenge_finds_the_smallest_answer() -> None:
    answer = solve_challenge("abc", 2)
    assert pow_ok("abc", answer, 2)
    assert not any(pow_ok("abc", a, 2) for a in range(answer))


async def test_harvester_fills_the_pool_with_working_cookies(
    demo_site: DemoSite, make_ctx: MakeCtx
) -> None:
    ctx = make_ctx(CookieHarvester, cookies_per_site=2, cookie_ttl_seconds=100)
    events = ctx.events.subscribe("cf-cookies.refilled")
    first_event = asyncio.ensure_future(anext(events))
    await asyncio.sleep(0.05)  # let the subscription start before anything is published

    await CookieHarvester().run_one(harvest_task(demo_site.site), ctx)

    pool = ctx.pool(COOKIE_POOL).where(site=demo_site.site)
    items = await pool.list()
    assert len(items) == 2 and await pool.size() == 2
    for _id, cookie, tags in items:
        assert tags == CfCookieTags(site=demo_site.site, fresh=True)
        assert "cf_clearance" in cookie.cookies and cookie.user_agent
    async with pool.claim() as item:
        assert item is not None and item.expires_at is not None
        # TTL: the smaller of the config's 100 s and 90 % of the site's 300 s.
        assert 95 < item.expires_at - time.time() <= 100
    assert await asyncio.wait_for(first_event, 5) == {"site": demo_site.site, "added": 2}
    assert demo_site.state.stats.challenges_solved == 2

    # A second request finds the pool full and harvests nothing.
    await CookieHarvester().run_one(harvest_task(demo_site.site), ctx)
    assert demo_site.state.stats.challenges_solved == 2
    await events.aclose()


async def test_harvested_cookie_expires_with_the_configured_ttl(
    demo_site: DemoSite, make_ctx: MakeCtx, frozen: ManualClock
) -> None:
    ctx = make_ctx(CookieHarvester, cookies_per_site=1, cookie_ttl_seconds=0.3)
    await CookieHarvester().run_one(harvest_task(demo_site.site), ctx)
    pool = ctx.pool(COOKIE_POOL)
    assert await pool.size() == 1
    frozen.advance(0.4)
    assert await pool.size() == 0


async def test_scraper_claims_a_cookie_fetches_and_emits(
    demo_site: DemoSite, make_ctx: MakeCtx
) -> None:
    await CookieHarvester().run_one(
        harvest_task(demo_site.site), make_ctx(CookieHarvester, cookies_per_site=1)
    )
    ctx = make_ctx(Scraper)
    for page in (1, 2, 3):
        await Scraper().run_one(scrape_task(f"{demo_site.url}/products/{page}"), ctx)

    out = await ctx.stream(SCRAPER_OUT).pop(n=10)
    assert [e.payload.url for e in out] == [f"{demo_site.url}/products/{p}" for p in (1, 2, 3)]
    assert all(e.payload.status == 200 and e.payload.body_len > 0 for e in out)
    # The cookie went back to the pool after each task.
    assert await ctx.pool(COOKIE_POOL).size() == 1
    assert demo_site.state.stats.pages_served == 3


async def test_scraper_on_a_dry_pool_requests_one_harvest_and_retries_later(
    demo_site: DemoSite, make_ctx: MakeCtx, mem_backend: Backend
) -> None:
    ctx = make_ctx(Scraper, cookie_wait_seconds=0)  # fail at once, do not wait for a harvest
    for task_id in ("a", "b", "c"):
        with pytest.raises(NoCookie):
            await Scraper().run_one(scrape_task(f"{demo_site.url}/products/1", task_id), ctx)
    # Three dry slots, one harvest task (the idempotency key is per site and minute).
    depths = await mem_backend.queues.depths("cf-cookie-harvester")
    assert depths.pending == 1
    [reservation] = await mem_backend.queues.reserve("cf-cookie-harvester")
    assert reservation.body.payload == {"site": demo_site.site}
    assert await ctx.stream(SCRAPER_OUT).length() == 0


async def test_scraper_evicts_a_rejected_cookie_and_requests_a_harvest(
    demo_site: DemoSite, make_ctx: MakeCtx, mem_backend: Backend
) -> None:
    ctx = make_ctx(Scraper)
    pool = ctx.pool(COOKIE_POOL)
    burnt = CfCookie(cookies={"cf_clearance": "forged"}, user_agent="UA", site=demo_site.site)
    await pool.put(payload=burnt, tags=CfCookieTags(site=demo_site.site), ttl_seconds=60)

    with pytest.raises(CookieRejected):
        await Scraper().run_one(scrape_task(f"{demo_site.url}/products/1"), ctx)

    assert await pool.size() == 0 and await pool.list() == []
    assert (await mem_backend.queues.depths("cf-cookie-harvester")).pending == 1
    assert demo_site.state.stats.pages_rejected == 1


async def test_scraper_raises_on_a_server_error_and_keeps_the_cookie(
    demo_site: DemoSite, make_ctx: MakeCtx
) -> None:
    await CookieHarvester().run_one(
        harvest_task(demo_site.site), make_ctx(CookieHarvester, cookies_per_site=1)
    )
    ctx = make_ctx(Scraper)
    with pytest.raises(UpstreamError, match="500"):
        await Scraper().run_one(scrape_task(f"{demo_site.url}/products/13"), ctx)
    assert await ctx.pool(COOKIE_POOL).size() == 1
    assert await ctx.stream(SCRAPER_OUT).length() == 0


async def test_scraper_only_uses_cookies_of_the_url_site(
    demo_site: DemoSite, make_ctx: MakeCtx
) -> None:
    ctx = make_ctx(Scraper, cookie_wait_seconds=0.3)
    other = CfCookie(cookies={"cf_clearance": "x"}, user_agent="UA", site="elsewhere:1")
    await ctx.pool(COOKIE_POOL).put(payload=other, tags=CfCookieTags(site="elsewhere:1"))
    with pytest.raises(NoCookie):
        await Scraper().run_one(scrape_task(f"{demo_site.url}/products/1"), ctx)
    assert await ctx.pool(COOKIE_POOL).size() == 1


async def test_scraper_on_a_dry_pool_waits_quietly_for_the_harvest(
    demo_site: DemoSite, make_ctx: MakeCtx, mem_backend: Backend
) -> None:
    # The demo's first second: scrapes start before the first harvest filled the pool.
    # They wait for it instead of each failing an attempt (one warning per task).
    scraper_ctx = make_ctx(Scraper, cookie_wait_seconds=30)
    scrapes = [
        asyncio.create_task(
            Scraper().run_one(scrape_task(f"{demo_site.url}/products/{i}", f"s{i}"), scraper_ctx)
        )
        for i in (1, 2, 3)
    ]
    await asyncio.sleep(0.3)
    assert not any(s.done() for s in scrapes)  # still waiting, none failed
    # One harvest was asked for; run it as the harvester's worker would.
    [reservation] = await mem_backend.queues.reserve("cf-cookie-harvester")
    assert reservation.body.payload == {"site": demo_site.site}
    await CookieHarvester().run_one(
        harvest_task(demo_site.site), make_ctx(CookieHarvester, cookies_per_site=1)
    )
    # One cookie for three scrapes: they take turns with it rather than fail.
    await asyncio.wait_for(asyncio.gather(*scrapes), 15)
    entries = await scraper_ctx.stream(SCRAPER_OUT).peek(10)
    assert sorted(e.payload.url for e in entries) == [
        f"{demo_site.url}/products/{i}" for i in (1, 2, 3)
    ]


async def test_scraper_gives_up_waiting_when_the_slot_stops(
    demo_site: DemoSite, make_ctx: MakeCtx
) -> None:
    ctx = make_ctx(Scraper, cookie_wait_seconds=30)
    scrape = asyncio.create_task(Scraper().run_one(scrape_task(f"{demo_site.url}/p/1"), ctx))
    await asyncio.sleep(0.2)
    started = time.monotonic()
    ctx.shutdown.set()
    with pytest.raises(NoCookie):
        await asyncio.wait_for(scrape, 5)
    assert time.monotonic() - started < 2
