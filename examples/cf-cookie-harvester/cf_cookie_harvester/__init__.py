"""cf-cookie-harvester: solve a site's challenge and keep the clearance where it is used.

A batch automation; each ``HarvestRequest(site=...)`` solves the site's proof-of-work
challenge (:func:`earn_clearance`) and keeps the clearance cookie:

- **with identities** (its type's config sets ``identity_pool``, as ``fleet dev --demo``
  does): clears the identity the task leased. The challenge is solved through
  ``ctx.identity.http()``, its exit and its User-Agent, so the cookie is one the site
  accepts from that identity, and lands in the identity's jar (saved when the task
  ends). An identity that holds a live clearance already is left as it is.
- **without**: tops the ``cf-cookies`` pool up to ``cookies_per_site`` cookies, each
  stored with the User-Agent and the proxy that earned it. The pool is declared inline
  (``Pools``), so the catalog shows who owns it.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
from cf_contracts import COOKIE_POOL, CfCookie, CfCookieTags, HarvestRequest
from pydantic import Field

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register

if TYPE_CHECKING:
    from fleet.core.identity import IdentityHandle

CLEARANCE_COOKIE = "cf_clearance"

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


async def earn_clearance(http: httpx.AsyncClient, challenge_url: str) -> httpx.Response:
    """Solve the site's challenge with ``http``: the cookie lands in its jar, bound by
    the site to its exit and its User-Agent. Returns the site's answer (``expires_in``:
    the cookie's life).

    Raises:
        ChallengeFailed: The answer was refused.
        httpx.HTTPError: The site could not be reached or answered with an error.
    """
    challenge = (await http.get(challenge_url)).raise_for_status().json()
    # Hashing is CPU work: keep it off the loop so other slots stay responsive.
    answer = await asyncio.to_thread(
        solve_challenge, challenge["nonce"], int(challenge["difficulty"])
    )
    response = await http.post(
        challenge_url, json={"challenge_id": challenge["challenge_id"], "answer": answer}
    )
    if response.status_code == 403:
        raise ChallengeFailed(f"{challenge_url} refused the answer: {response.text[:200]}")
    return response.raise_for_status()


def has_clearance(cookies: Iterable[Mapping[str, Any]], host: str, margin: float = 5.0) -> bool:
    """Whether a jar (``storage_state`` cookies, an identity's) holds a clearance for
    ``host`` that lives ``margin`` seconds more (it may be used up: the site says)."""
    now = time.time()
    return any(
        c.get("name") == CLEARANCE_COOKIE
        and str(c.get("domain", "")).lstrip(".") == host
        and (float(c.get("expires", -1)) < 0 or float(c.get("expires", -1)) > now + margin)
        for c in cookies
    )


async def harvest_cookie(
    site: str, config: HarvesterConfig, proxy_url: str | None
) -> tuple[CfCookie, float]:
    """Get one clearance cookie for ``site`` (for the pool); returns it and its
    lifetime in seconds.

    Raises:
        ChallengeFailed: The answer was refused.
        httpx.HTTPError: The site could not be reached or answered with an error.
    """
    user_agent = random.choice(USER_AGENTS)
    async with httpx.AsyncClient(
        proxy=proxy_url, headers={"User-Agent": user_agent}, timeout=config.request_timeout_seconds
    ) as client:
        response = await earn_clearance(client, config.challenge_url.format(site=site))
        lifetime = float(response.json().get("expires_in", config.cookie_ttl_seconds))
    cookie = CfCookie(
        cookies=dict(response.cookies), user_agent=user_agent, proxy_url=proxy_url, site=site
    )
    # Expire our copy before the site does, so consumers never claim a dying cookie.
    return cookie, min(config.cookie_ttl_seconds, lifetime * 0.9)


@register("cf-cookie-harvester")
class CookieHarvester(BatchAutomation[HarvesterConfig]):
    """Clears identities for a site, or keeps ``cf-cookies`` stocked without them."""

    Config = HarvesterConfig
    TaskPayload = HarvestRequest
    Pools = {"cookies": COOKIE_POOL}

    async def run_one(self, task: Task[HarvestRequest], ctx: Context[HarvesterConfig]) -> None:
        if ctx.identity is not None:
            await self.clear_identity(task.payload.site, ctx.identity, ctx)
        else:
            await self.fill_pool(task.payload.site, ctx)

    async def clear_identity(
        self, site: str, identity: IdentityHandle, ctx: Context[HarvesterConfig]
    ) -> None:
        """Earn a clearance for ``site`` through the leased identity (its exit, its
        headers); the cookie lands in its jar, saved when the task ends."""
        if has_clearance(identity.cookies, urlsplit(f"//{site}").hostname or site):
            return  # cleared already: its scrapes will say if the cookie is used up
        started = time.perf_counter()
        http = identity.http(timeout=ctx.config.request_timeout_seconds)
        await earn_clearance(http, ctx.config.challenge_url.format(site=site))
        ctx.metrics.incr("cookies_harvested")
        ctx.metrics.observe("harvest_seconds", time.perf_counter() - started)
        ctx.logger.info("identity %s cleared for %s", identity.id, site)
        await ctx.events.publish(
            "cf-cookies.refilled", {"site": site, "added": 1, "identity": identity.id}
        )

    async def fill_pool(self, site: str, ctx: Context[HarvesterConfig]) -> None:
        """Top the pool up to ``cookies_per_site`` cookies for ``site``."""
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
