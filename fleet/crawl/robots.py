"""robots.txt, fetched once per host for the whole fleet.

The first task of a host that finds no stored copy takes the host's fleet-wide lock,
fetches ``/robots.txt`` and stores its status and text in the backend's KV for the
crawler's ``robots_ttl_seconds``; every other task, on any worker, reads that copy (and
keeps a parsed one in memory, a bounded cache, until it expires). The text is parsed
by Protego (Scrapy's parser: wildcards, ``Allow`` precedence, ``Crawl-delay``,
``Sitemap``).

What a status means (RFC 9309): 2xx, the rules; 4xx, no rules (everything allowed);
5xx or no answer, the host is unreachable and nothing is fetched yet: the task fails
and is retried (kept a minute, so a down host is not asked by every task).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from protego import Protego

from fleet.core.errors import FleetError
from fleet.core.handles import KV, Lock

#: The KV namespace of stored robots.txt copies (key: ``host:port``).
NAMESPACE = "fleet-crawl-robots"
#: Google reads the first 500 KiB of a robots.txt; so does Fleet.
MAX_BYTES = 500 * 1024
#: How long an unreachable host's answer is kept before it is asked again.
UNREACHABLE_SECONDS = 60.0
#: Hosts whose parsed rules a worker keeps in memory.
CACHE_HOSTS = 4096


class RobotsUnavailable(FleetError):
    """A host's robots.txt answered 5xx (or nothing): nothing of it is fetched yet."""


@dataclass
class Robots:
    """One host's parsed robots.txt."""

    status: int
    text: str
    expires: float
    _parsed: Any = field(default=None, repr=False)

    @property
    def parser(self) -> Any:
        if self._parsed is None:
            self._parsed = Protego.parse(self.text if 200 <= self.status < 300 else "")
        return self._parsed

    @property
    def reachable(self) -> bool:
        return self.status < 500

    def allows(self, url: str, user_agent: str) -> bool:
        """Whether ``user_agent`` may fetch ``url``."""
        return bool(self.parser.can_fetch(url, user_agent))

    def crawl_delay(self, user_agent: str) -> float | None:
        """The ``Crawl-delay`` of the group matching ``user_agent`` (seconds), if any."""
        delay = self.parser.crawl_delay(user_agent)
        return None if delay is None or delay <= 0 else float(delay)

    def sitemaps(self) -> list[str]:
        """The ``Sitemap:`` URLs it names."""
        return [str(u) for u in self.parser.sitemaps]


Fetch = Callable[[], Awaitable[tuple[int, str]]]


class RobotsBook:
    """The robots.txt of each host a worker's crawl tasks meet (one per worker and
    crawler type, shared by its slots)."""

    def __init__(self, ttl_seconds: float) -> None:
        self.ttl_seconds = ttl_seconds
        self._cache: OrderedDict[str, Robots] = OrderedDict()

    def peek(self, host: str) -> Robots | None:
        """The host's rules this worker last read, expired or not (None: never read)."""
        return self._cache.get(host)

    async def get(self, host: str, kv: KV, lock: Lock, fetch: Fetch) -> tuple[Robots, bool]:
        """The host's robots.txt, and whether this call fetched it (the host's first
        request of the fleet since the stored copy expired)."""
        now = time.time()
        known = self._cache.get(host)
        if known is not None and known.expires > now:
            self._cache.move_to_end(host)
            return known, False
        robots = await self._stored(host, kv, now)
        fetched = False
        if robots is None:
            async with lock as acquired:
                robots = await self._stored(host, kv, time.time())
                if robots is None:
                    # Held by nobody (acquired) or by a holder that gave up: fetch.
                    del acquired
                    status, text = await fetch()
                    ttl = self.ttl_seconds if status < 500 else UNREACHABLE_SECONDS
                    robots = Robots(status, text[:MAX_BYTES], time.time() + ttl)
                    await kv.set(host, {"s": status, "t": robots.text}, ttl_seconds=ttl)
                    fetched = True
        self._cache[host] = robots
        self._cache.move_to_end(host)
        while len(self._cache) > CACHE_HOSTS:
            self._cache.popitem(last=False)
        return robots, fetched

    async def _stored(self, host: str, kv: KV, now: float) -> Robots | None:
        found = await kv.get(host)
        if not isinstance(found, dict):
            return None
        # The stored copy's own expiry is the KV's; a worker re-reads it at most
        # once a minute so an operator's delete (or a new TTL) is seen soon.
        return Robots(
            int(found.get("s", 200)), str(found.get("t", "")), now + min(60.0, self.ttl_seconds)
        )
