"""The pure parts of a crawl: canonical URLs, hosts, the scope, a page's links,
sitemaps, what a recrawl packs, the crawler's config and its class checks."""

from __future__ import annotations

import gzip
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from fleet.core.browser import BrowserNeeds
from fleet.core.config import FLEET_WIDE_FIELDS
from fleet.core.errors import ContractValueError
from fleet.core.flow import GroupLimits
from fleet.crawl import CrawlConfig, Crawler, Link, Page, canonical, host_of, seed_task
from fleet.crawl.crawler import delay_rate
from fleet.crawl.recrawl import MAX_LINKS, Kept, key_of, pack, unpack
from fleet.crawl.scope import Scope
from fleet.crawl.sitemaps import MAX_BYTES, inflate, read


@pytest.mark.parametrize(
    ("url", "want"),
    [
        ("HTTP://Example.COM:80/a/b?z=1&a=2#frag", "http://example.com/a/b?a=2&z=1"),
        ("https://example.com:443", "https://example.com/"),
        ("https://example.com:8443/x", "https://example.com:8443/x"),
        ("http://example.com/a%7eb", "http://example.com/a~b"),
        ("http://127.0.0.1:8001/p/1", "http://127.0.0.1:8001/p/1"),
        ("http://[::1]:81/x", "http://[::1]:81/x"),
    ],
)
def test_canonical(url: str, want: str) -> None:
    assert canonical(url) == want
    assert canonical(want) == want  # a canonical URL is its own canonical form


@pytest.mark.parametrize(
    "bad",
    ["mailto:a@b.c", "javascript:void(0)", "/relative", "ftp://h/x", "http://u:p@h/", "x" * 3000],
)
def test_what_is_not_a_crawl_url(bad: str) -> None:
    with pytest.raises(ContractValueError) as e:
        canonical(bad)
    assert e.value.field == "url"


def test_host_of_writes_the_port() -> None:
    assert host_of("http://example.com/x") == "example.com:80"
    assert host_of("https://example.com/x") == "example.com:443"
    assert host_of("http://127.0.0.1:8001/") == "127.0.0.1:8001"


def test_the_scope() -> None:
    own = Scope()
    assert own.verdict("http://a/x", 1, page_host="a:80") == "follow"
    assert own.verdict("http://b/x", 1, page_host="a:80") == "other_site"
    two = Scope(frozenset({"a:80", "b:80"}), include=(r"/p/",), exclude=(r"\?print",), max_depth=2)
    assert two.verdict("http://b/p/1", 2, page_host="a:80") == "follow"
    assert two.verdict("http://c/p/1", 1, page_host="a:80") == "other_site"
    assert two.verdict("http://a/q/1", 1, page_host="a:80") == "excluded"
    assert two.verdict("http://a/p/1?print=1", 1, page_host="a:80") == "excluded"
    assert two.verdict("http://a/p/1", 3, page_host="a:80") == "too_deep"


def test_a_page_links() -> None:
    html = """<html><head><base href="/dir/"><link rel="next" href="page2">
    <link rel="stylesheet" href="s.css"></head><body>
    <a href="a">a</a><a href="/b#x">b</a><A HREF="a">again</A><a href="mailto:x@y">m</a>
    <a href="http://other/" rel="nofollow">n</a><a>no href</a><iframe src="frame"></iframe>
    <area href="http://other:81/z"></body>"""
    page = Page("http://h/x/y", 200, {"content-type": "text/html"}, html)
    assert page.links() == [
        "http://h/dir/page2",
        "http://h/dir/a",
        "http://h/b",
        "http://h/dir/frame",
        "http://other:81/z",
    ]
    assert Page("http://h/", 200, {"content-type": "image/png"}, "<a href='x'>").links() == []


def test_sitemaps_plain_gzip_and_nested() -> None:
    urlset = (
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        "<url><loc>http://a/p1</loc></url><url><loc>http://a/p2#x</loc></url>"
        "<url><loc>http://a/p1</loc></url><url><loc>not a url</loc></url></urlset>"
    )
    assert read(urlset.encode()).pages == ["http://a/p1", "http://a/p2"]
    assert read(gzip.compress(urlset.encode())).pages == ["http://a/p1", "http://a/p2"]
    index = (
        '<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        "<sitemap><loc>http://a/s1.xml.gz</loc></sitemap></sitemapindex>"
    )
    got = read(index.encode())
    assert got.pages == [] and got.sitemaps == ["http://a/s1.xml.gz"]
    assert read(b"") == read(b"   ") == read(b"\x1f\x8bnot gzip")
    assert read(b"\x1f\x8bnot gzip").pages == []


def test_a_gzip_bomb_is_cut() -> None:
    bomb = gzip.compress(b"x" * (MAX_BYTES + 1_000_000))
    assert len(inflate(bomb)) == MAX_BYTES


def test_what_a_recrawl_packs() -> None:
    links = [f"http://h/p/{i}" for i in range(MAX_LINKS + 10)]
    assert unpack(pack(links)) == links[:MAX_LINKS]
    assert unpack(pack([])) == [] and unpack("not base64!") == []
    assert len(key_of("http://h/")) == 22 and key_of("http://h/") != key_of("http://h/x")
    kept = Kept('"e1"', "Mon, 07 Dec 2026 10:00:00 GMT", [])
    assert kept.headers() == {
        "if-none-match": '"e1"',
        "if-modified-since": "Mon, 07 Dec 2026 10:00:00 GMT",
    }
    assert Kept(None, None, []).headers() == {}


def test_crawl_config_limits_hosts() -> None:
    cfg = CrawlConfig()
    assert cfg.group_limits() == (2, "1/s")
    assert CrawlConfig(per_host_rate="30 / m").per_host_rate == "30/m"
    with pytest.raises(ValidationError, match="group_concurrency"):
        CrawlConfig(group_concurrency=3)
    assert CrawlConfig.model_json_schema()["properties"]["group_rate"]["type"] == "null"
    with pytest.raises(ValidationError):
        CrawlConfig(per_host_rate="fast")
    # What every reserve reads: the stored config's per_host fields.
    limits = GroupLimits.of_config({"per_host_concurrency": 3, "per_host_rate": "2/s"})
    assert (limits.concurrency, limits.rate) == (3, "2/s")
    assert {"per_host_concurrency", "per_host_rate"} <= set(FLEET_WIDE_FIELDS)


def test_crawl_delay_rates() -> None:
    assert delay_rate(2) == "1/2s"
    assert delay_rate(0.3) == "10/3s"
    assert delay_rate(1.25) == "10/13s"


def test_seed_task() -> None:
    key, group, task = seed_task("HTTP://A:80/x#y", hosts=["a:80"], max_pages=5)
    assert (key, group) == ("http://a/x", "a:80")
    assert (task.url, task.hosts, task.max_pages, task.depth) == ("http://a/x", ["a:80"], 5, 0)


class Item(BaseModel):
    url: str


def test_a_crawler_class_is_checked() -> None:
    with pytest.raises(ContractValueError, match="does not compile"):

        class BadPattern(Crawler[CrawlConfig]):
            include = ("(unclosed",)

    with pytest.raises(ContractValueError, match="render needs a browser pool"):

        class NoBrowser(Crawler[CrawlConfig]):
            render = True

    with pytest.raises(ContractValueError, match="max_pages"):

        class ZeroPages(Crawler[CrawlConfig]):
            max_pages = 0

    class Fine(Crawler[CrawlConfig]):
        Output = Item
        render = True
        Browser = BrowserNeeds(size=1)
        include = (r"/p/",)

        async def parse(self, page: Page, ctx: Any) -> Any:
            yield Link(page.url)

    assert Fine.include == (r"/p/",)


def test_what_a_status_means() -> None:
    from fleet.core.errors import Throttled
    from fleet.crawl import CrawlError

    crawler = Crawler[CrawlConfig]()
    assert crawler._answered(200, "u") and crawler._answered(301, "u")
    assert not crawler._answered(404, "u")
    with pytest.raises(CrawlError, match="503"):
        crawler._answered(503, "u")
    for header, wait in (("7", 7.0), (None, 60.0), ("soon", 60.0), ("0", 1.0), ("1e9", 86400.0)):
        with pytest.raises(Throttled) as e:
            crawler._answered(429, "u", header)
        assert e.value.retry_after == wait
