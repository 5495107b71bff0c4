"""cf-scraper: fetch protected pages with a clearance cookie claimed from the pool.

A batch automation. Per ``ScrapeTask(url=...)`` it claims a cookie for the
URL's site, fetches the page with that cookie and its user agent (and proxy),
and emits a ``ScrapeResult``. A cookie the site rejects is evicted; when the
pool has none, it asks the harvester for more and raises so the framework
retries the task later (with backoff, then the dead-letter queue).
"""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import httpx
from cf_contracts import COOKIE_POOL, HARVESTER, HarvestRequest, ScrapeResult, ScrapeTask
from pydantic import Field

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register


class ScraperConfig(BaseConfig):
    """Scraper settings. Waiting for cookies costs attempts, so allow a few more."""

    max_attempts: int = Field(default=6, ge=1, le=1_000)
    hold_seconds: float = Field(default=60.0, gt=0)
    timeout_seconds: float = Field(default=10.0, gt=0)


class NoCookie(RuntimeError):
    """The pool has no cookie for the site yet; a harvest was requested."""


class CookieRejected(RuntimeError):
    """The site refused the cookie; it was evicted and a harvest requested."""


class UpstreamError(RuntimeError):
    """The site answered with a 5xx; worth retrying."""


def site_of(url: str) -> str:
    """The pool's site tag for ``url``: its ``host[:port]``."""
    return urlsplit(url).netloc


async def request_harvest(ctx: Context[ScraperConfig], site: str) -> str:
    """Ask the harvester for cookies of ``site``, at most once a minute per site.

    Every slot that finds the pool dry calls this; the idempotency key turns the
    stampede into one task (later calls get the same task id back).
    """
    minute = int(time.time() // 60)
    return await ctx.submit(
        HARVESTER, HarvestRequest(site=site), idempotency_key=f"harvest:{site}:{minute}"
    )


@register("cf-scraper")
class Scraper(BatchAutomation[ScraperConfig]):
    """Fetches one page per task through the shared cookie pool."""

    Config = ScraperConfig
    TaskPayload = ScrapeTask
    Output = ScrapeResult

    async def run_one(self, task: Task[ScrapeTask], ctx: Context[ScraperConfig]) -> None:
        url = task.payload.url
        site = site_of(url)
        pool = ctx.pool(COOKIE_POOL).where(site=site)
        async with pool.claim(hold_seconds=ctx.config.hold_seconds) as cookie:
            if cookie is None:
                await request_harvest(ctx, site)
                raise NoCookie(f"no cookie for {site} yet; harvest requested")
            jar = cookie.payload
            async with httpx.AsyncClient(
                proxy=jar.proxy_url,
                headers={"User-Agent": jar.user_agent},
                cookies=jar.cookies,
                timeout=ctx.config.timeout_seconds,
            ) as client:
                response = await client.get(url)
            if response.status_code == 403:
                # Burnt (expired, used up, or bound to another client): never hand it out again.
                await cookie.evict()
                await request_harvest(ctx, site)
                ctx.metrics.incr("cookies_rejected")
                raise CookieRejected(f"{site} rejected cookie {cookie.id}")
            # Leaving the block releases the cookie for the next task.
        if response.status_code >= 500:
            raise UpstreamError(f"{url} answered {response.status_code}")
        ctx.metrics.incr("pages_fetched")
        await ctx.emit(
            ScrapeResult(url=url, status=response.status_code, body_len=len(response.content))
        )
