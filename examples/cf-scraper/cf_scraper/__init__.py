"""cf-scraper: fetch protected pages behind a site's challenge.

A batch automation; per ``ScrapeTask(url=...)`` it fetches the page and emits a
``ScrapeResult``:

- **with identities** (its type's config sets ``identity_pool``, as ``fleet dev --demo``
  does): through ``ctx.identity.http()``. The identity's clearance cookie goes out
  through the exit and with the User-Agent that earned it, so the site accepts it. An
  identity the site challenges (no clearance yet, expired, used up) earns one there and
  then, through itself, and keeps it for its next tasks; one still refused after that is
  blocked (``ctx.identity.blocked``: it cools down fleet-wide, the task goes back
  uncharged and the next try takes another identity).
- **without**: with a cookie claimed from the ``cf-cookies`` pool, sent with the
  User-Agent and the proxy stored with it. A cookie the site rejects is evicted; when
  the pool has none, it asks the harvester for more and waits quietly for up to
  ``cookie_wait_seconds``; only then does it raise, so the framework retries the task
  later (with backoff, then the dead-letter queue).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httpx
from cf_contracts import (
    COOKIE_POOL,
    HARVESTER,
    CfCookie,
    CfCookieTags,
    HarvestRequest,
    ScrapeResult,
    ScrapeTask,
)
from pydantic import Field

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register
from fleet.core.blocks import Blocked, BlockRule

if TYPE_CHECKING:
    from fleet.core.handles import ClaimedItem, PoolHandle
    from fleet.core.identity import IdentityHandle

#: First and longest pause between two looks at a dry pool while a task waits.
COOKIE_POLL_SECONDS = (0.1, 1.0)


class ScraperConfig(BaseConfig):
    """Scraper settings. Waiting for cookies costs attempts, so allow a few more."""

    max_attempts: int = Field(default=6, ge=1, le=1_000)
    hold_seconds: float = Field(default=60.0, gt=0)
    request_timeout_seconds: float = Field(default=10.0, gt=0)
    #: How long a task waits for a cookie when the pool has none (a fresh pool
    #: while the first harvest runs, every cookie claimed) before it fails and is
    #: retried. Waiting is quiet; a failed attempt logs a warning. 0: fail at once.
    cookie_wait_seconds: float = Field(default=30.0, ge=0)
    #: The demo site's 403 "challenge required" is a challenge (docs/blocks.md), which
    #: the demo-pow solver gets past (``cf_scraper/solver.py``).
    block_rules: list[BlockRule] = Field(
        default_factory=lambda: [
            BlockRule(
                kind="challenge",
                vendor="fleet-demo",
                status=[403],
                body="challenge required",
                detail="the demo site's proof-of-work challenge",
            )
        ]
    )
    solver: str | None = Field(default="cf_scraper.solver:DemoPowSolver", min_length=1)


class NoCookie(RuntimeError):
    """The pool had no cookie for the site for ``cookie_wait_seconds``; a harvest
    was requested."""


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


async def wait_for_cookie(
    ctx: Context[ScraperConfig], pool: PoolHandle[CfCookie, CfCookieTags], deadline: float
) -> bool:
    """Wait until ``pool`` has an unclaimed cookie.

    Returns:
        True once one is there (claim it; another slot may be quicker), False at
        ``deadline`` (a ``time.monotonic()`` value) or when the slot is stopping.
    """
    pause, longest = COOKIE_POLL_SECONDS
    while (remaining := deadline - time.monotonic()) > 0:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ctx.shutdown.wait(), min(pause, remaining))
            return False  # the slot is stopping: do not hold its task any longer
        if await pool.size():
            return True
        pause = min(pause * 2, longest)
    return False


@register("cf-scraper")
class Scraper(BatchAutomation[ScraperConfig]):
    """Fetches one page per task through the shared cookie pool."""

    Config = ScraperConfig
    TaskPayload = ScrapeTask
    Output = ScrapeResult

    async def run_one(self, task: Task[ScrapeTask], ctx: Context[ScraperConfig]) -> None:
        url = task.payload.url
        if ctx.identity is not None:
            response = await self.fetch_as(ctx.identity, ctx, url)
        else:
            response = await self.fetch_with_pool(ctx, url)
        if response.status_code >= 500:
            raise UpstreamError(f"{url} answered {response.status_code}")
        ctx.metrics.incr("pages_fetched")
        await ctx.emit(
            ScrapeResult(
                url=url,
                status=response.status_code,
                body_len=len(response.content),
                identity=None if ctx.identity is None else ctx.identity.id,
            )
        )

    async def fetch_as(
        self, identity: IdentityHandle, ctx: Context[ScraperConfig], url: str
    ) -> httpx.Response:
        """GET ``url`` as the leased identity: its exit, its headers, its cookies.

        A challenge means the identity holds no clearance the site takes: the type's
        solver earns one through the same client (the cookie lands in its jar, saved at
        the task's end) and it asks again.

        Raises:
            Blocked: challenged again after solving (or refused outright): left to the
                worker, which cools the identity and sends the task back uncharged.
        """
        http = identity.http(timeout=ctx.config.request_timeout_seconds)
        try:
            return await http.get(url)
        except Blocked as exc:
            if exc.challenge is None:
                raise
            ctx.metrics.incr("challenges_met")
            ctx.logger.debug("identity %s challenged on %s: solving", identity.id, url)
            await ctx.solve(exc.challenge)
        return await http.get(url)

    async def fetch_with_pool(self, ctx: Context[ScraperConfig], url: str) -> httpx.Response:
        """GET ``url`` with a cookie claimed from the pool (waiting for a harvest when
        the pool is dry).

        Raises:
            NoCookie: None came within ``cookie_wait_seconds`` (a harvest was requested).
            CookieRejected: The site refused the claimed cookie (it was evicted).
        """
        site = site_of(url)
        pool = ctx.pool(COOKIE_POOL).where(site=site)
        deadline: float | None = None
        while True:
            async with pool.claim(hold_seconds=ctx.config.hold_seconds) as cookie:
                if cookie is not None:
                    response = await self.fetch(ctx, url, site, cookie)
                    break
            # A dry pool: ask for a harvest and wait for it quietly, rather than fail
            # an attempt (one warning each) per task: a fresh demo has 30 scrapes and
            # no cookie until the first harvest is done.
            if deadline is None:
                await request_harvest(ctx, site)
                deadline = time.monotonic() + ctx.config.cookie_wait_seconds
            if not await wait_for_cookie(ctx, pool, deadline):
                raise NoCookie(f"no cookie for {site} yet; harvest requested")
        return response

    async def fetch(
        self,
        ctx: Context[ScraperConfig],
        url: str,
        site: str,
        cookie: ClaimedItem[CfCookie, CfCookieTags],
    ) -> httpx.Response:
        """GET ``url`` with the claimed cookie; a rejected cookie is evicted.

        Raises:
            CookieRejected: The site answered 403 (a harvest was requested).
        """
        jar = cookie.payload
        async with httpx.AsyncClient(
            proxy=jar.proxy_url,
            headers={"User-Agent": jar.user_agent},
            cookies=jar.cookies,
            timeout=ctx.config.request_timeout_seconds,
        ) as client:
            response = await client.get(url)
        if response.status_code == 403:
            # Burnt (expired, used up, or bound to another client): never hand it out again.
            await cookie.evict()
            await request_harvest(ctx, site)
            ctx.metrics.incr("cookies_rejected")
            raise CookieRejected(f"{site} rejected cookie {cookie.id}")
        return response  # leaving the claim block releases the cookie for the next task
