"""A ``Crawler`` in one in-process worker of 8 slots against the local multi-host site,
on every backend: every allowed page fetched once, no disallowed page asked, at most
``per_host_concurrency`` requests in flight per host as the site measures them, the
``Crawl-delay`` held, robots.txt fetched once per host, sitemaps read, and a recrawl
answered 304."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import BaseModel

from fleet.backends.base import Backend
from fleet.core.meters import run_scope
from fleet.crawl import CrawlConfig, Crawler, Link, seed_task
from fleet.crawl.robots import NAMESPACE as ROBOTS_NAMESPACE
from tests.crawl.site import Site, SiteSpec
from tests.worker.support import push_config, running_worker, wait_until

pytestmark = pytest.mark.timeout(120)

TITLE = re.compile(r"<h1>(.*?)</h1>")


class Title(BaseModel):
    url: str
    title: str


class FastConfig(CrawlConfig):
    per_host_rate: str | None = "50/s"


class SiteCrawler(Crawler[FastConfig]):
    Config = FastConfig
    Output = Title

    async def parse(self, page: Any, ctx: Any) -> Any:
        for title in TITLE.findall(page.text):
            yield Title(url=page.url, title=title)
        for url in page.links():
            yield Link(url)


SiteCrawler.automation_type = "site-crawl"


class RecrawlSite(SiteCrawler):
    recrawl = True


RecrawlSite.automation_type = "site-recrawl"


class SitemapSite(SiteCrawler):
    seed_from_sitemaps = True


SitemapSite.automation_type = "sitemap-crawl"


async def crawl(
    backend: Backend,
    cls: type[Crawler[Any]],
    seeds: list[str],
    config: dict[str, Any] | None = None,
    **caps: Any,
) -> dict[str, Any]:
    """Run one crawl to its end (``config``: the type's, stored first, as a PATCH
    does); the run's record and meters."""
    t = cls.automation_type
    if config:
        await push_config(backend, t, config, [])
    run_id = await backend.runs.create(name="crawl")
    hosts = sorted({seed_task(u)[1] for u in seeds})
    from fleet.core.submission import make_push_request

    requests = []
    for u in seeds:
        key, group, task = seed_task(u, hosts=hosts, **caps)
        requests.append(
            make_push_request(task.model_dump(mode="json"), group=group, run=run_id, unique_key=key)
        )
    await backend.queues.push(t, requests)
    async with running_worker(backend, [cls], f"w-{t}", heartbeat_seconds=0.2):

        async def ended() -> bool:
            run = await backend.runs.get(run_id)
            return run is not None and run.state != "running"

        await wait_until(ended, timeout=90, what="the crawl's end")
    run = await backend.runs.get(run_id)
    assert run is not None
    meters = (await backend.meters.get([run_scope(run_id)])).get(run_scope(run_id), {})
    return {"run": run, "meters": meters}


async def test_a_polite_crawl_of_three_hosts(backend: Backend) -> None:
    spec = SiteSpec(
        hosts=3,
        pages=25,
        latency=0.1,  # long enough for a third request to a host to be tempted
        robots={
            0: "User-agent: *\nDisallow: /private/\nCrawl-delay: 0.3\n",
            1: "User-agent: *\nDisallow: /p/3\n",
        },
    )
    with Site(spec).serving() as site:
        # The crawl's site is its seeds' hosts: links between them are followed.
        out = await crawl(backend, SiteCrawler, [site.url(h) for h in range(3)])
        run = out["run"]
        assert run.state == "done"
        expected = {Site.path(i) for i in range(spec.pages)}
        # Host 0: every page once, never its disallowed /private/ secret.
        assert site.fetched(0) == {p: 1 for p in expected}
        # Host 1: /p/3 disallowed (its subtree reached by other links), /private/ allowed.
        assert site.fetched(1) == {p: 1 for p in (expected - {"/p/3"}) | {"/private/secret"}}
        assert site.fetched(2) == {p: 1 for p in expected | {"/private/secret"}}
        for h in range(3):
            hits = [x for x in site.hits if x.host == h and x.path == "/robots.txt"]
            assert len(hits) == 1, f"robots.txt of host {h} asked {len(hits)} times"
            assert site.max_in_flight(h) <= 2
        # Host 0 asks 0.3 s between requests: held between every two, robots.txt among
        # them (Fleet adds 0.1 s for what passes between the backend's lock and the
        # wire; 5 % is left to this site's threads on a loaded machine).
        gaps = site.gaps(0, pages_only=False)
        assert min(gaps) >= 0.95 * 0.3, gaps
        assert max(site.max_in_flight(h) for h in (1, 2)) == 2  # the cap was reached
        meters = out["meters"]
        assert meters["robots_skipped"] == 2  # /private/secret on host 0, /p/3 on host 1
        assert meters["pages"] == 3 * spec.pages - 1 + 2
        assert meters["items"] == meters["pages"]
        assert run.counters["duplicates"] > 0
        stored = await backend.kv.get(ROBOTS_NAMESPACE, f"127.0.0.1:{site.ports[0]}")
        assert stored is not None and "Crawl-delay" in stored
        group = await backend.groups.info("site-crawl", f"127.0.0.1:{site.ports[0]}")
        assert group.settings is not None and group.settings.rate == "10/3s"


async def test_max_pages_and_max_depth(backend: Backend) -> None:
    # /p/1 and /p/2 fail once: a failed attempt takes no page of the cap.
    flaky = frozenset({"/p/1", "/p/2"})
    with Site(SiteSpec(hosts=1, pages=40, flaky=flaky)).serving() as site:
        out = await crawl(backend, SiteCrawler, [site.url(0)], max_pages=10)
        assert out["run"].state == "done"
        assert sum(site.fetched(0).values()) == 10
        assert sum(site.fetched(0, 503).values()) == 2
        assert out["meters"]["pages"] == 10
    with Site(SiteSpec(hosts=1, pages=40)).serving() as site:
        out = await crawl(backend, SiteCrawler, [site.url(0)], max_depth=2)
        # depth 0: /, 1: /p/1 /p/2, 2: their children 3..6 (and /private/secret)
        assert set(site.fetched(0)) == {Site.path(i) for i in range(7)} | {"/private/secret"}


async def test_sitemaps_seed_the_crawl(backend: Backend) -> None:
    spec = SiteSpec(
        hosts=1,
        pages=10,
        orphans=5,
        robots={0: "User-agent: *\nSitemap: /sitemap.xml\n"},
        sitemap_hosts=frozenset({0}),
    )
    with Site(spec).serving() as site:
        out = await crawl(backend, SitemapSite, [site.url(0)])
        assert out["run"].state == "done"
        pages = site.fetched(0)
        # Orphans (no link leads to them) are fetched: the gzip sitemap named them.
        assert {Site.path(i) for i in range(15)} <= set(pages)
        assert all(n == 1 for n in pages.values()), pages
        assert pages["/sitemap.xml"] == 1 and pages["/sitemap-pages.xml.gz"] == 1
        assert out["meters"]["sitemaps"] == 2


async def test_a_recrawl_asks_only_what_changed(backend: Backend) -> None:
    with Site(SiteSpec(hosts=2, pages=12)).serving() as site:
        first = await crawl(backend, RecrawlSite, [site.url(0), site.url(1)])
        assert first["meters"].get("not_modified", 0) == 0
        n = first["meters"]["pages"]
        second = await crawl(backend, RecrawlSite, [site.url(0), site.url(1)])
        assert second["run"].state == "done"
        # Every page answered 304 and was not parsed; its kept links led on.
        assert second["meters"]["not_modified"] == n
        assert second["meters"].get("pages", 0) == 0
        assert sum(site.fetched(0, 304).values()) + sum(site.fetched(1, 304).values()) == n


async def test_a_page_too_large_is_not_read(backend: Backend) -> None:
    # /p/1 is 200 KB, over the 64 KiB cap: counted, not parsed, so /p/4 (only it links
    # there) is never found; /p/3 is, through /p/6's link to its parent.
    spec = SiteSpec(hosts=1, pages=8, big=frozenset({"/p/1"}))
    with Site(spec).serving() as site:
        out = await crawl(
            backend, SiteCrawler, [site.url(0)], {"per_host_rate": "50/s", "max_page_bytes": 65536}
        )
        assert out["run"].state == "done"
        assert out["meters"]["too_large"] == 1
        assert out["meters"]["pages"] == 7  # /, /p/2, 3, 5, 6, 7 and /private/secret
        assert site.fetched(0)["/p/1"] == 1 and "/p/4" not in site.fetched(0)
