"""robots.txt once per host for the fleet, on every backend: many tasks (of several
workers: several books) asking at once fetch it once; a 4xx allows everything; a 5xx
makes the host unreachable for a minute; the copy is read back from the backend."""

from __future__ import annotations

import asyncio
import time

from fleet.backends.base import Backend
from fleet.core.handles import KV, Lock
from fleet.crawl.robots import NAMESPACE, UNREACHABLE_SECONDS, RobotsBook

TEXT = (
    "User-agent: *\nDisallow: /private/\nCrawl-delay: 2\nSitemap: http://h/sm.xml\n\n"
    "User-agent: picky\nDisallow: /\n"
)


async def test_fetched_once_by_many_workers(backend: Backend) -> None:
    fetches = 0

    async def fetch() -> tuple[int, str]:
        nonlocal fetches
        fetches += 1
        await asyncio.sleep(0.05)  # others ask meanwhile
        return 200, TEXT

    books = [RobotsBook(3600) for _ in range(3)]  # three workers

    async def ask(book: RobotsBook) -> tuple[bool, bool]:
        lock = Lock(backend.locks, "fleet-crawl-robots:h:80", hold_seconds=30, wait_seconds=30)
        robots, fetched = await book.get("h:80", KV(backend.kv, NAMESPACE), lock, fetch)
        return robots.allows("http://h/private/x", "FleetCrawler"), fetched

    answers = await asyncio.gather(*(ask(books[i % 3]) for i in range(12)))
    assert fetches == 1
    assert [fetched for _, fetched in answers].count(True) == 1
    assert all(not allowed for allowed, _ in answers)
    robots, fetched = await books[1].get(
        "h:80", KV(backend.kv, NAMESPACE), Lock(backend.locks, "x"), fetch
    )
    assert not fetched and fetches == 1
    assert robots.allows("http://h/public", "FleetCrawler")
    assert not robots.allows("http://h/public", "picky")
    assert robots.crawl_delay("FleetCrawler") == 2.0
    assert robots.sitemaps() == ["http://h/sm.xml"]
    # A new worker reads the stored copy, and does not fetch.
    fresh = RobotsBook(3600)
    robots, fetched = await fresh.get(
        "h:80", KV(backend.kv, NAMESPACE), Lock(backend.locks, "x"), fetch
    )
    assert not fetched and fetches == 1 and robots.crawl_delay("FleetCrawler") == 2.0


async def test_4xx_allows_and_5xx_is_unreachable(backend: Backend) -> None:
    async def missing() -> tuple[int, str]:
        return 404, "Disallow: /"

    async def down() -> tuple[int, str]:
        return 503, ""

    book = RobotsBook(3600)
    kv = KV(backend.kv, NAMESPACE)
    robots, _ = await book.get("a:80", kv, Lock(backend.locks, "a"), missing)
    assert robots.reachable and robots.allows("http://a/anything", "x")
    robots, _ = await book.get("b:80", kv, Lock(backend.locks, "b"), down)
    assert not robots.reachable
    assert robots.expires - time.time() <= UNREACHABLE_SECONDS + 1
    # Kept a minute, not the robots TTL.
    stored = await backend.kv.get(NAMESPACE, "b:80")
    assert stored is not None and '"s": 503' in stored.replace('"s":503', '"s": 503')
