"""A crawler with ``render = True`` crawls a local site in Debian's Chromium: each page
opened in a tab of the type's browser pool, its rendered HTML parsed (a link a script
writes is followed, which a plain fetch would miss), ``page.browser`` usable in
``parse``, every page once."""

from __future__ import annotations

import os
import threading
from collections import Counter
from typing import Any

import pytest
from pydantic import BaseModel

from fleet.backends.base import Backend
from fleet.core.browser import BrowserNeeds
from fleet.crawl import CrawlConfig, Crawler, Link, Page
from tests.browser.stack import CHROMIUM, CHROMIUM_ARGS
from tests.crawl.test_crawler import crawl
from tests.support.redis_server import require_redis
from tests.support.sites import QuietHandler, serving
from tests.worker.conftest import mem

__all__ = ["mem"]  # the fixture this module reuses

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

PAGES = {
    "/": "<script>document.write('<a href=\"/written\">by script</a>')</script>",
    "/written": '<a href="/static">static</a>',
    "/static": '<a href="/">home</a>',
}
seen: Counter[str] = Counter()
lock = threading.Lock()


class Site(QuietHandler):
    def do_GET(self) -> None:
        with lock:
            seen[self.path] += 1
        body = PAGES.get(self.path)
        if body is None:
            self.answer(404, b"no")
            return
        html = f"<html><head><title>{self.path}</title></head><body>{body}</body></html>"
        self.answer(200, html.encode(), {"content-type": "text/html"})


class Title(BaseModel):
    url: str
    title: str


class Rendered(Crawler[CrawlConfig]):
    Output = Title
    Browser = BrowserNeeds(size=1, executable_path=CHROMIUM, launch_args=tuple(CHROMIUM_ARGS))
    render = True

    async def parse(self, page: Page, ctx: Any) -> Any:
        yield Title(url=page.url, title=await page.browser.title())
        for url in page.links():
            yield Link(url)


Rendered.automation_type = "rendered-crawl"


@pytest.fixture(autouse=True)
def chromium_present() -> None:
    if not os.path.exists(CHROMIUM):
        if require_redis():  # strict (CI) mode: .ci/run installs Chromium
            pytest.fail("Debian's chromium is required but not installed")
        pytest.skip("chromium not installed (apt-get install chromium)")


async def test_rendered_pages(mem: Backend) -> None:
    seen.clear()
    with serving(Site) as url:
        out = await crawl(mem, Rendered, [url], {"per_host_rate": "50/s"})
    assert out["run"].state == "done"
    del seen["/favicon.ico"]  # the browser's own
    assert seen == {"/robots.txt": 1, "/": 1, "/written": 1, "/static": 1}
    titles = sorted(e.payload["title"] for e in await mem.streams.tail("rendered-crawl", 10))
    assert titles == ["/", "/static", "/written"]
    assert out["meters"]["pages"] == 3
