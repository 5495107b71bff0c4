"""cf-cookie-harvester and cf-scraper with identities (issue 43, item 7), against the
real demo site behind the demo's three local proxies (distinct exits: 127.0.0.2-4).

The site binds a clearance cookie to the exit and the User-Agent that solved its
challenge: a cookie moved to another exit is refused, the same cookie sent through its
identity is accepted."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from cf_contracts import (
    COOKIE_POOL,
    SCRAPER_OUT,
    CfCookie,
    CfCookieTags,
    HarvestRequest,
    ScrapeTask,
)
from cf_cookie_harvester import CLEARANCE_COOKIE, CookieHarvester
from cf_scraper import CookieRejected, Scraper

from fleet.backends.base import Backend
from fleet.core import Context, Task
from fleet.core.blocks import Blocked
from fleet.core.identities import Identity, parse_identity
from fleet.core.identity import IdentityHandle, IdentityPolicy, lease_waiting
from fleet.core.submission import make_push_request
from fleet.dev.demo_proxies import (
    SOURCE_ADDRESSES,
    DemoProxy,
    source_available,
    start_demo_proxies,
    stop_demo_proxies,
)
from fleet.dev.demo_seed import demo_identities
from fleet.dev.demo_state import DemoSettings
from tests.examples.conftest import DemoSite, MakeCtx, eventually
from tests.examples.test_pipeline import running_worker

pytestmark = pytest.mark.skipif(
    not all(source_available(a) for a in SOURCE_ADDRESSES),
    reason="this system does not route 127.0.0.2-4 to loopback",
)


@pytest.fixture
async def exits() -> AsyncIterator[list[DemoProxy]]:
    proxies = await start_demo_proxies()
    try:
        yield proxies
    finally:
        await stop_demo_proxies(proxies)


def demo_pool(exits: list[DemoProxy]) -> list[Identity]:
    """The identities ``fleet dev --demo`` creates: demo-1..3, one per exit."""
    return [parse_identity(raw) for raw in demo_identities([p.url for p in exits])["identities"]]


@asynccontextmanager
async def as_identity(
    backend: Backend, ctx: Context[Any], pool: str, identity: Identity
) -> AsyncIterator[IdentityHandle]:
    """Run a task's body as ``identity``, as the worker would: leased into
    ``ctx.identity`` (from a pool that holds only it), released at the end."""
    if await backend.identities.get(pool, identity.id) is None:
        await backend.identities.put(pool, [identity])  # again would empty its jar
    policy = IdentityPolicy(pool=pool, wait_seconds=1)
    handle = IdentityHandle(
        backend.identities, policy, await lease_waiting(backend.identities, policy)
    )
    ctx.identity = handle
    ok = False
    try:
        yield handle
        ok = True
    finally:
        ctx.identity = None
        await handle.finish(ok)


def harvest(site: str) -> Task[HarvestRequest]:
    return Task(id="h", payload=HarvestRequest(site=site), automation_type="cf-cookie-harvester")


def scrape(url: str, task_id: str = "s") -> Task[ScrapeTask]:
    return Task(id=task_id, payload=ScrapeTask(url=url), automation_type="cf-scraper")


async def clearance_of(backend: Backend, pool: str, identity_id: str) -> str:
    stored = await backend.identities.get(pool, identity_id)
    assert stored is not None
    (value,) = [c["value"] for c in stored.cookies if c["name"] == CLEARANCE_COOKIE]
    return str(value)


async def test_a_cookie_moved_to_another_exit_is_refused_and_accepted_through_its_identity(
    demo_site: DemoSite, exits: list[DemoProxy], make_ctx: MakeCtx, mem_backend: Backend
) -> None:
    first, second, _ = demo_pool(exits)
    assert first.fingerprint is not None
    ctx = make_ctx(CookieHarvester)
    async with as_identity(mem_backend, ctx, "one", first):
        await CookieHarvester().run_one(harvest(demo_site.site), ctx)
    # The harvester solved the challenge through demo-1: its exit, its User-Agent.
    (clearance,) = demo_site.state.clearances.values()
    assert (clearance.client, clearance.user_agent) == ("127.0.0.2", first.fingerprint.user_agent)
    cookie = {CLEARANCE_COOKIE: await clearance_of(mem_backend, "one", "demo-1")}
    page = f"{demo_site.url}/products/1"
    ua = {"User-Agent": first.fingerprint.user_agent}

    # Without identities: the cookie and the User-Agent, moved to another exit.
    async with httpx.AsyncClient(proxy=second.proxy, headers=ua, cookies=cookie) as moved:
        refused = await moved.get(page)
    assert refused.status_code == 403
    assert refused.json() == {"error": "challenge required", "reason": "cookie from another exit"}
    # Its own exit, another User-Agent: refused too.
    async with httpx.AsyncClient(proxy=first.proxy, cookies=cookie) as other_ua:
        assert (await other_ua.get(page)).json()["reason"] == "cookie from another user agent"
    # The pool-based scraper, handed the cookie with the other exit: rejected, evicted.
    pool_ctx = make_ctx(Scraper)
    jar = CfCookie(
        cookies=cookie, user_agent=ua["User-Agent"], proxy_url=second.proxy, site=demo_site.site
    )
    await pool_ctx.pool(COOKIE_POOL).put(payload=jar, tags=CfCookieTags(site=demo_site.site))
    with pytest.raises(CookieRejected):
        await Scraper().run_one(scrape(page), pool_ctx)

    # With identities: the scraper leases demo-1, and its cookie goes out the same way.
    scraper_ctx = make_ctx(Scraper)
    async with as_identity(mem_backend, scraper_ctx, "one", first):
        await Scraper().run_one(scrape(page), scraper_ctx)
    (out,) = await scraper_ctx.stream(SCRAPER_OUT).peek(10)
    assert (out.payload.status, out.payload.identity) == (200, "demo-1")
    stats = demo_site.state.stats
    assert stats.challenges_solved == 1  # the harvester's clearance did it
    assert (stats.rejected_other_exit, stats.rejected_other_user_agent) == (2, 1)


async def test_a_challenged_identity_earns_its_clearance_and_keeps_it(
    demo_site: DemoSite, exits: list[DemoProxy], make_ctx: MakeCtx, mem_backend: Backend
) -> None:
    _, _, third = demo_pool(exits)
    ctx = make_ctx(Scraper)
    for n in (1, 2, 3):
        async with as_identity(mem_backend, ctx, "three", third):
            await Scraper().run_one(scrape(f"{demo_site.url}/products/{n}", f"s{n}"), ctx)
    out = await ctx.stream(SCRAPER_OUT).peek(10)
    assert [(e.payload.status, e.payload.identity) for e in out] == [(200, "demo-3")] * 3
    # One solve, by the first task, through demo-3's exit; the next two reused its cookie.
    (clearance,) = demo_site.state.clearances.values()
    assert clearance.client == "127.0.0.4" and clearance.uses == 3
    assert demo_site.state.stats.challenges_solved == 1
    assert await clearance_of(mem_backend, "three", "demo-3")
    # The harvester finds demo-3 cleared already and solves nothing more.
    harvester_ctx = make_ctx(CookieHarvester)
    async with as_identity(mem_backend, harvester_ctx, "three", third):
        await CookieHarvester().run_one(harvest(demo_site.site), harvester_ctx)
    assert demo_site.state.stats.challenges_solved == 1


@pytest.mark.parametrize("demo_settings", [DemoSettings(failure_rate=0.0, cookie_max_uses=0)])
async def test_an_identity_refused_after_solving_is_blocked(
    demo_site: DemoSite, exits: list[DemoProxy], make_ctx: MakeCtx, mem_backend: Backend
) -> None:
    first = demo_pool(exits)[0]
    ctx = make_ctx(Scraper)
    with pytest.raises(Blocked) as refused:
        async with as_identity(mem_backend, ctx, "one", first):
            await Scraper().run_one(scrape(f"{demo_site.url}/products/1"), ctx)
    # Challenged again after its solver's clearance: run_one leaves the block to the
    # worker (tests/blocks/test_blocks_worker.py: it cools the identity, uncharged).
    assert (refused.value.verdict.kind, refused.value.verdict.vendor) == ("challenge", "fleet-demo")
    assert demo_site.state.stats.challenges_solved == 1
    assert await ctx.stream(SCRAPER_OUT).length() == 0
    assert await ctx._backend.counters.get("solver:cf_scraper.solver:DemoPowSolver:solved") == 1


async def test_the_pipeline_with_identities_under_a_worker(
    demo_site: DemoSite, exits: list[DemoProxy], mem_backend: Backend
) -> None:
    """The demo's setup: harvester and scraper lease the pool ``demo`` (3 identities, 3
    exits); every page is fetched, every clearance was earned and used by one identity
    through its own exit with its own User-Agent, and no cookie ever moved."""
    identities = demo_pool(exits)
    await mem_backend.identities.put("demo", identities)
    for automation_type, slots in (("cf-cookie-harvester", 1), ("cf-scraper", 3)):
        await mem_backend.configs.set(automation_type, {"slots": slots, "identity_pool": "demo"})
    await mem_backend.queues.push(
        "cf-cookie-harvester", [make_push_request({"site": demo_site.site}) for _ in range(3)]
    )
    pages = [p for p in range(1, 20) if p != 13]  # 13 is always broken
    await mem_backend.queues.push(
        "cf-scraper", [make_push_request({"url": f"{demo_site.url}/products/{p}"}) for p in pages]
    )
    async with running_worker(mem_backend, [CookieHarvester, Scraper]):

        async def all_done() -> bool:
            return (await mem_backend.queues.depths("cf-scraper")).counters.completed == 18

        assert await eventually(all_done, timeout=30)
    out = [e.payload for e in await mem_backend.streams.read("cf-scraper", n=50)]
    assert sorted(int(o["url"].rsplit("/", 1)[1]) for o in out) == pages
    assert all(o["status"] == 200 and o["identity"] in {"demo-1", "demo-2", "demo-3"} for o in out)
    by_exit = {
        p.exit: i.fingerprint.user_agent
        for p, i in zip(exits, identities, strict=True)
        if i.fingerprint
    }
    clearances = demo_site.state.clearances.values()
    assert clearances and all(by_exit[c.client] == c.user_agent for c in clearances)
    assert len({c.client for c in clearances}) == len(list(clearances))  # one per exit at most
    stats = demo_site.state.stats
    assert stats.rejected_other_exit == stats.rejected_other_user_agent == 0
