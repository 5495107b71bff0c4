"""The demo site's front page links to an open part a crawl can walk (issue 42, item
6): the crawl of docs/runs.md, started at the front page, finds every catalog section
without a clearance cookie, instead of ending at 1 page of 1."""

from __future__ import annotations

import re
from urllib.parse import urljoin

import httpx

from fleet.dev.demo_site import CATALOG_SECTIONS, create_demo_app

LINK = re.compile(r'href="([^"#]+)"')  # the pattern of docs/runs.md's crawl


async def test_a_crawl_of_the_front_page_reaches_every_section() -> None:
    transport = httpx.ASGITransport(app=create_demo_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://demo") as http:
        seen: set[str] = set()
        todo = ["http://demo/"]
        statuses: dict[str, int] = {}
        while todo:
            url = todo.pop()
            if url in seen:
                continue
            seen.add(url)
            r = await http.get(url)
            statuses[url] = r.status_code
            if r.headers.get("content-type", "").startswith("text/html"):
                todo += [
                    u
                    for u in (urljoin(url, h) for h in LINK.findall(r.text))
                    if u.startswith("http://demo/")
                ]
    sections = {u for u in seen if "/catalog/" in u}
    assert sections == {f"http://demo/catalog/{n}" for n in range(1, CATALOG_SECTIONS + 1)}
    assert all(statuses[u] == 200 for u in sections | {"http://demo/"})
    # nothing the crawl finds fails: the products stay behind the challenge, unlinked
    assert all(code == 200 for code in statuses.values()), statuses
    assert len(seen) == CATALOG_SECTIONS + 2  # home, the sections, /challenge
