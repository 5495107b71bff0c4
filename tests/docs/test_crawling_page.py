"""docs/crawling.md runs as written: each crawler block, saved as a module, crawls the
local multi-host site in a worker (the dozen-line one, the sitemap one, the recrawl
one); the scope block's class keeps to its patterns; the browser block declares its
pool; the Python client block seeds a crawl through a real master; the config and
groups lines name real settings."""

from __future__ import annotations

import asyncio
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from fleet.backends import open_backend
from fleet.cli import main
from fleet.client.http import FleetClient
from fleet.core.automation import get_automation, unregister
from fleet.crawl import Crawler
from fleet.crawl.scope import Scope
from tests.crawl.site import Site, SiteSpec
from tests.crawl.test_crawler import crawl
from tests.docs.blocks import fenced_blocks, section
from tests.support.master_proc import MASTER_TOKEN, MasterProcess
from tests.support.sqlite_file import backend
from tests.support.waits import until
from tests.worker.support import push_config, running_worker

__all__ = ["backend"]  # the fixture this module reuses

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "crawling.md").read_text(encoding="utf-8")
#: The blocks' crawlers keep their per-host concurrency; the rate is the test's.
FAST = {"per_host_rate": "50/s"}


def _python(heading: str) -> list[str]:
    return [b.text for b in fenced_blocks(section(PAGE, heading)) if b.lang == "python"]


class Loaded:
    """Doc blocks saved as modules and imported; their types unregistered after."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.names: list[str] = []
        sys.path.insert(0, str(tmp))

    def load(self, module: str, text: str, automation_type: str) -> type[Crawler[Any]]:
        (self.tmp / f"{module}.py").write_text(text)
        self.names.append(module)
        __import__(module)
        cls = get_automation(automation_type)
        assert cls is not None and issubclass(cls, Crawler)
        return cls

    def close(self) -> None:
        sys.path.remove(str(self.tmp))
        for module in self.names:
            sys.modules.pop(module, None)


@pytest.fixture
def loaded(tmp_path: Path) -> Iterator[Loaded]:
    blocks = Loaded(tmp_path)
    types = ["quotes", "shop-crawl", "quotes-sitemaps", "quotes-recrawl", "spa-crawl"]
    try:
        yield blocks
    finally:
        blocks.close()
        for t in types:
            unregister(t)


async def test_the_dozen_line_crawler(backend: Any, loaded: Loaded) -> None:
    (text,) = _python("## A crawler in a dozen lines")
    cls = loaded.load("quotes_crawl", text, "quotes")
    with Site(SiteSpec(hosts=2, pages=15)).serving() as site:
        out = await crawl(backend, cls, [site.url(0), site.url(1)], FAST)
        assert out["run"].state == "done"
        for h in (0, 1):
            assert set(site.fetched(h).values()) == {1}
            assert len(site.fetched(h)) == 15 + 1  # and /private/secret: no robots.txt here
        assert out["meters"]["items"] == out["meters"]["pages"] == 32
    emitted = await backend.streams.tail("quotes", 100)
    assert {e.payload["text"] for e in emitted} >= {"host 0 page 0", "host 1 page 14"}


def test_the_scope_block(loaded: Loaded) -> None:
    (text,) = _python("## Scope")
    cls = loaded.load("shop_crawl", text, "shop-crawl")
    config = cls.Config()
    assert config.group_limits() == (4, "2/s")
    scope = Scope(frozenset({"shop.example:443"}), tuple(cls.include), tuple(cls.exclude), 6)
    follow = scope.verdict("https://shop.example/product/7", 1, page_host="shop.example:443")
    assert follow == "follow"
    for url in ("https://shop.example/about", "https://shop.example/category/a?sort=price"):
        assert scope.verdict(url, 1, page_host="shop.example:443") == "excluded"
    assert cls.max_pages == 50_000 and cls.user_agent.startswith("ShopCrawl/")


async def test_the_sitemaps_block(backend: Any, loaded: Loaded) -> None:
    (text,) = _python("## Sitemaps")
    cls = loaded.load("quotes_sitemaps", text, "quotes-sitemaps")
    spec = SiteSpec(hosts=1, pages=8, orphans=4, sitemap_hosts=frozenset({0}))
    with Site(spec).serving() as site:
        out = await crawl(backend, cls, [site.url(0)], FAST)
        assert {Site.path(i) for i in range(12)} <= set(site.fetched(0))
        assert out["meters"]["sitemaps"] == 2  # the index and its gzip sitemap


async def test_the_recrawl_block(backend: Any, loaded: Loaded) -> None:
    (text,) = _python("## Recrawl")
    cls = loaded.load("quotes_recrawl", text, "quotes-recrawl")
    with Site(SiteSpec(hosts=1, pages=10)).serving() as site:
        first = await crawl(backend, cls, [site.url(0)], FAST)
        second = await crawl(backend, cls, [site.url(0)], FAST)
    assert second["meters"]["not_modified"] == first["meters"]["pages"] == 11
    assert "pages" not in second["meters"]


def test_the_browser_block(loaded: Loaded) -> None:
    (text,) = _python("## Browser pages")
    cls = loaded.load("spa_crawl", text, "spa-crawl")
    assert cls.render and cls.Browser is not None and cls.Browser.size == 2


def test_the_config_and_groups_lines() -> None:
    (block,) = [b for b in fenced_blocks(section(PAGE, "## Polite per host, fleet-wide"))]
    from fleet.crawl import CrawlConfig

    for line in block.text.splitlines():
        words = shlex.split(line.split("#", 1)[0])
        if words[:3] == ["fleet", "config", "set"]:
            fields = dict(w.split("=", 1) for w in words[4:])
            CrawlConfig.model_validate(fields)  # each a real field, each value valid
    assert "fleet groups quotes 127.0.0.1:8765 --rate 1/10s" in block.text


async def test_the_python_client_block(loaded: Loaded, tmp_path: Path) -> None:
    (text,) = _python("## Start and watch a crawl")
    cls = loaded.load("quotes_crawl", _python("## A crawler in a dozen lines")[0], "quotes")
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    shared = await open_backend(url)
    master = MasterProcess(url, tmp_path)
    try:
        await master.wait_ready()
        with Site(SiteSpec(hosts=1, pages=6, latency=0.0)).serving() as site:
            # The block names the site's URL: this test serves it on a free port.
            here = text.replace("http://127.0.0.1:8765/", site.url(0))
            async with running_worker(shared, [cls], "w-client"):
                client = FleetClient(master.url, MASTER_TOKEN)

                def seed() -> str:
                    with client:
                        scope: dict[str, Any] = {"client": client}
                        exec(compile(here, "crawling.md", "exec"), scope)
                        return str(scope["run_id"])

                run_id = await asyncio.to_thread(seed)

                async def ended() -> bool:
                    run = await shared.runs.get(run_id)
                    return run is not None and run.state == "done"

                await until(ended, timeout=60, what="the client's crawl to end")
            assert set(site.fetched(0).values()) == {1} and len(site.fetched(0)) == 7
    finally:
        master.close()
        await shared.close()


def _shell(lines: str, master: MasterProcess, urls: dict[str, str]) -> list[str]:
    """A bash block's fleet lines run as written (``RUN=$(...)`` kept and given on;
    the block's ``fleet worker ... &`` is the test's own worker; URLs mapped to the
    local site), each through the CLI against ``master``; their outputs."""
    outputs: list[str] = []
    run = ""
    for line in lines.splitlines():
        for named, local in urls.items():
            line = line.replace(named, local)
        line = line.split("#", 1)[0].strip().replace("$RUN", run)
        if not line or line.startswith("fleet worker"):
            continue
        capture = line.startswith("RUN=$(")
        if capture:
            line = line[len("RUN=$(") : -1]
        words = shlex.split(line)
        assert words[0] == "fleet", line
        r = CliRunner().invoke(main, [*words[1:], "--url", master.url, "--token", MASTER_TOKEN])
        assert r.exit_code == 0, (line, r.output)
        outputs.append(r.output)
        if capture:
            run = r.output.strip()
    return outputs


async def test_the_bash_blocks(loaded: Loaded, tmp_path: Path) -> None:
    cls = loaded.load("quotes_crawl", _python("## A crawler in a dozen lines")[0], "quotes")
    start = [b.text for b in fenced_blocks(section(PAGE, "## Start and watch a crawl"))]
    polite = [b.text for b in fenced_blocks(section(PAGE, "## Polite per host, fleet-wide"))]
    cli_page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    (cli,) = [
        b.text for b in fenced_blocks(section(cli_page, "### `fleet crawl start CRAWLER URL...`"))
    ]
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    shared = await open_backend(url)
    master = MasterProcess(url, tmp_path)
    try:
        await master.wait_ready()
        await push_config(shared, "quotes", FAST, [])
        with Site(SiteSpec(hosts=2, pages=6, latency=0.0)).serving() as site:
            urls = {"http://127.0.0.1:8765/": site.url(0), "http://127.0.0.1:8766/": site.url(1)}
            urls["127.0.0.1:8765"] = f"127.0.0.1:{site.ports[0]}"
            async with running_worker(shared, [cls], "w-bash"):
                await until(lambda: shared.catalog.get("quotes"), timeout=20, what="quotes known")
                watched = await asyncio.to_thread(_shell, start[0], master, urls)
                assert "pages" in watched[1] and "state     done" in watched[1]
                assert "host 0 page 0" in watched[2]  # fleet tail quotes
                assert set(site.fetched(0).values()) == {1}
                first = len(site.fetched(0))
                # The cli.md example: two hosts, watched to the end.
                shown = await asyncio.to_thread(_shell, cli, master, urls)
                assert "state     done" in shown[1]
                # A crawl of its own: host 0 again, and now host 1 too, each page once more.
                assert set(site.fetched(0).values()) == {2} and len(site.fetched(0)) == first
                assert set(site.fetched(1).values()) == {1} and len(site.fetched(1)) == first
            await asyncio.to_thread(_shell, polite[0], master, urls)
        limits, _ = await shared.groups.defaults("quotes")
        assert (limits.concurrency, limits.rate) == (4, "5/s")
        group = await shared.groups.info("quotes", f"127.0.0.1:{site.ports[0]}")
        assert group.settings is not None and group.settings.rate == "1/10s"
    finally:
        master.close()
        await shared.close()
