"""cf-cookie-harvester: solve a site's challenge, put the clearance cookie in the pool.

A batch automation: each ``HarvestRequest(site=...)`` tops the pool up to
``cookies_per_site`` cookies for that site. The pool it fills is declared
inline (``Pools``), so the catalog shows who owns ``cf-cookies``.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time

import httpx
from cf_contracts import COOKIE_POOL, CfCookie, CfCookieTags, HarvestRequest
from pydantic import Field

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register

USER_AGENTS = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_7) AppleWebKit/605.1.15 Version/18.1",
)


class HarvesterConfig(BaseConfig):
    """Harvester settings (the framework fields come from ``BaseConfig``)."""

    challenge_url: str = "http://{site}/challenge"
    cookies_per_site: int = Field(default=3, ge=1, le=100)
    cookie_ttl_seconds: float = Field(default=240.0, gt=0)
    request_timeout_seconds: float = Field(default=10.0, gt=0)


class ChallengeFailed(RuntimeError):
    """The site did not accept our answer (raise: the task is retried)."""


def solve_challenge(nonce: str, difficulty: int, limit: int = 50_000_000) -> int:
    """The smallest answer whose ``sha256("<nonce>:<answer>")`` starts with
    ``difficulty`` hex zeros.

    Raises:
        ChallengeFailed: If no answer below ``limit`` works.
    """
    prefix = "0" * difficulty
    for answer in range(limit):
        if hashlib.sha256(f"{nonce}:{answer}".encode()).hexdigest().startswith(prefix):
            return answer
    raise ChallengeFailed(f"no answer below {limit} at difficulty {difficulty}")


async def harvest_cookie(
    site: str, config: HarvesterConfig, proxy_url: str | None
) -> tuple[CfCookie, float]:
    """Get one clearance cookie for ``site``; returns it and its lifetime in seconds.

    Raises:
        ChallengeFailed: The answer was refused.
        httpx.HTTPError: The site could not be reached or answered with an error.
    """
    url = config.challenge_url.format(site=site)
    user_agent = random.choice(USER_AGENTS)
    async with httpx.AsyncClient(
        proxy=proxy_url, headers={"User-Agent": user_agent}, timeout=config.request_timeout_seconds
    ) as client:
        challenge = (await client.get(url)).raise_for_status().json()
        # Hashing is CPU work: keep it off the loop so other slots stay responsive.
        answer = await asyncio.to_thread(
            solve_challenge, challenge["nonce"], int(challenge["difficulty"])
        )
        response = await client.post(
            url, json={"challenge_id": challenge["challenge_id"], "answer": answer}
        )
        if response.status_code == 403:
            raise ChallengeFailed(f"{site} refused the answer: {response.text[:200]}")
        response.raise_for_status()
        lifetime = float(response.json().get("expires_in", config.cookie_ttl_seconds))
    cookie = CfCookie(
        cookies=dict(response.cookies), user_agent=user_agent, proxy_url=proxy_url, site=site
    )
    # Expire our copy before the site does, so consumers never claim a dying cookie.
    return cookie, min(config.cookie_ttl_seconds, lifetime * 0.9)


@register("cf-cookie-harvester")
class CookieHarvester(BatchAutomation[HarvesterConfig]):
    """Keeps ``cf-cookies`` stocked with clearance cookies, per site."""

    Config = HarvesterConfig
    TaskPayload = HarvestRequest
    Pools = {"cookies": COOKIE_POOL}

    async def run_one(self, task: Task[HarvestRequest], ctx: Context[HarvesterConfig]) -> None:
        site = task.payload.site
        pool = ctx.pool(COOKIE_POOL)
        missing = ctx.config.cookies_per_site - await pool.where(site=site).size()
        for _ in range(missing):
            started = time.perf_counter()
            cookie, ttl = await harvest_cookie(site, ctx.config, ctx.proxy_url)
            await pool.put(payload=cookie, tags=CfCookieTags(site=site), ttl_seconds=ttl)
            ctx.metrics.incr("cookies_harvested")
            ctx.metrics.observe("harvest_seconds", time.perf_counter() - started)
        if missing > 0:
            ctx.logger.info("put %d cookie(s) for %s in the pool", missing, site)
            await ctx.events.publish("cf-cookies.refilled", {"site": site, "added": missing})
