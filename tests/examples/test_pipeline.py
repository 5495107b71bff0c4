"""The cf pipeline under the real worker runtime (memory backend, real demo site):
scrapes find the pool dry, ask for a harvest, the harvester fills the pool, the
scrapes retry and emit, and a broken page ends in the dead-letter queue."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from cf_contracts import COOKIE_POOL, SCRAPER_OUT
from cf_cookie_harvester import CookieHarvester
from cf_scraper import Scraper
from fleet_pinger import Pinger

from fleet.backends.base import Backend
from fleet.core import Context
from fleet.core.automation import Automation
from fleet.core.backoff import RetryPolicy
from fleet.core.records import PushRequest
from fleet.core.submission import make_push_request
from fleet.worker.agent import Worker
from tests.examples.conftest import DemoSite, eventually


@asynccontextmanager
async def running_worker(
    backend: Backend, classes: list[type[Automation[Any]]]
) -> AsyncIterator[Worker]:
    worker = Worker(
        backend,
        classes,
        "w-examples",
        grace=2,
        heartbeat_seconds=0.5,
        policy=RetryPolicy(base=0.05, cap=0.2, jitter=0),
    )
    run = asyncio.create_task(worker.run())
    try:
        yield worker
    finally:
        worker.request_stop()
        await asyncio.wait_for(run, 10)


async def test_scrapes_trigger_a_harvest_then_emit_and_a_broken_page_dies(
    demo_site: DemoSite, mem_backend: Backend
) -> None:
    await mem_backend.configs.set("cf-scraper", {"slots": 3})

    def scrape(page: int, attempts: int) -> PushRequest:
        return make_push_request({"url": f"{demo_site.url}/products/{page}"}, max_attempts=attempts)

    ctx: Context[Any] = Context(backend=mem_backend, automation_type="test", config=lambda: None)
    # Retries are fast (0.05-0.2 s): allow enough attempts to outlast the harvest.
    await mem_backend.queues.push("cf-scraper", [scrape(p, 50) for p in range(1, 7)])

    async with running_worker(mem_backend, [CookieHarvester, Scraper]):

        async def six_done() -> bool:
            return (await mem_backend.queues.depths("cf-scraper")).counters.completed == 6

        assert await eventually(six_done, timeout=20)
        # Now that the pool holds cookies, a broken page fails on the site's 500s.
        await mem_backend.queues.push("cf-scraper", [scrape(13, 2)])

        async def one_dead() -> bool:
            return (await mem_backend.queues.depths("cf-scraper")).dead == 1

        assert await eventually(one_dead, timeout=10)

    out = await ctx.stream(SCRAPER_OUT).peek(n=20)
    assert sorted(int(e.payload.url.rsplit("/", 1)[1]) for e in out) == [1, 2, 3, 4, 5, 6]
    [dead] = await mem_backend.queues.dead_peek("cf-scraper")
    assert dead.payload["url"].endswith("/products/13") and "500" in (dead.last_error or "")
    harvests = (await mem_backend.queues.depths("cf-cookie-harvester")).counters.submitted
    assert 1 <= harvests <= 2  # one per site and minute (two if a minute turned over)
    # Every harvested cookie is back in the pool; one harvest tops it up to 3.
    solved = demo_site.state.stats.challenges_solved
    assert await ctx.pool(COOKIE_POOL).size() == solved
    assert solved == 3 * harvests or (harvests == 2 and 3 <= solved <= 6)


async def test_pinger_runs_in_a_worker_slot_until_the_worker_stops(
    demo_site: DemoSite, mem_backend: Backend
) -> None:
    await mem_backend.configs.set(
        "pinger", {"url": f"{demo_site.url}/health", "interval_seconds": 0.05}
    )
    async with running_worker(mem_backend, [Pinger]):

        async def pinged() -> bool:
            return await mem_backend.streams.length("pinger") >= 3

        assert await eventually(pinged)
    count = await mem_backend.streams.length("pinger")
    await asyncio.sleep(0.2)
    assert await mem_backend.streams.length("pinger") == count  # the slot stopped with the worker
