"""The crawl of docs/runs.md at the scale issue 27 asks: 2,000 linked pages with
cycles, two worker processes, each killed with SIGKILL twice during the crawl (at a
fifth, two, three and four fifths of the site, in turn) and started again. Every page
is fetched, the run ends ``done`` once, the report is emitted once, and
``duplicates`` counts the links back to pages already seen (plus those a page run
again after a kill submitted again). The site, the page's code and its CLI lines are
those of ``test_runs_crawl``."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fleet.backends import open_backend
from tests.master import test_runs_crawl as crawl
from tests.support.master_proc import MASTER_TOKEN, MasterProcess
from tests.worker.procs import ROOT, fleet_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

PAGES = 2000


@pytest.fixture
def site(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(crawl, "PAGES", PAGES)  # read by the site and links_of
    s = crawl.Site()
    s.thread.start()
    yield s
    s.server.shutdown()
    s.server.server_close()


async def _set_config(b: Any, automation_type: str, config: dict[str, Any]) -> None:
    configs = getattr(b, "configs", None)  # the configs capability, where it exists
    if configs is not None and hasattr(configs, "set"):
        await configs.set(automation_type, config)
    else:
        await b.config_set(automation_type, config)


async def test_a_2000_page_crawl_through_four_kills(
    site: Any, tmp_path: Path, shared_url: str
) -> None:
    url = shared_url
    plugin_dir = crawl.crawl_module(tmp_path)
    env = fleet_env(
        FLEET_ENTRY_POINTS="0", PYTHONPATH=os.pathsep.join([str(plugin_dir), str(ROOT)])
    )
    lines = crawl.doc_lines()
    master = MasterProcess(url, tmp_path)
    workers: list[subprocess.Popen[bytes]] = []
    user = {**env, "FLEET_MASTER_URL": master.url, "FLEET_ADMIN_TOKEN": MASTER_TOKEN}
    user["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
    try:
        await master.wait_ready()
        async with await open_backend(url) as b:
            await _set_config(b, "crawl-page", {"slots": 8, "visibility_seconds": 10})
            workers = [crawl.start_worker(url, w, env, tmp_path) for w in ("w1", "w2")]
            await crawl.registered(b, "crawl-report")
            run = crawl.cli(user, lines[1].split("=", 1)[1].strip("$()"), site).strip()
            crawl.cli(user, lines[2], site, run)
            for i, at in (
                (0, PAGES // 5),
                (1, 2 * PAGES // 5),
                (0, 3 * PAGES // 5),
                (1, 4 * PAGES // 5),
            ):

                async def reached(at: int = at) -> bool:
                    await asyncio.sleep(0)
                    return bool(site.fetched() >= at)

                await crawl._until(f"{at} pages", reached, 90)
                workers[i].kill()  # kill -9 in the middle of the crawl
                workers[i].wait(10)
                workers[i] = crawl.start_worker(url, f"w{i + 1}", env, tmp_path)
            shown = crawl.cli(user, lines[3], site, run)  # fleet runs watch
            assert "done" in shown
            record = await b.runs.get(run)
            assert record is not None and record.state == "done", record
            c = record.counters
            assert sorted(site.fetches) == list(range(PAGES)), "every page fetched"
            assert c["submitted"] == PAGES and c["done"] == PAGES, c
            assert c["pending"] == c["running"] == c["dead"] == 0, c
            links = crawl.links_of
            expected = sum(len(set(links(i))) for i in range(PAGES)) - (PAGES - 1)
            rerun = sum(len(set(links(i))) for i, n in site.fetches.items() if n > 1)
            assert expected <= c["duplicates"] <= expected + rerun, (c, expected, rerun)
            await crawl._until("the report", lambda: crawl._reported(b, run), 30)
            await asyncio.sleep(1.0)
            reports = await b.streams.read("crawl-report", n=10)
            assert len(reports) == 1, reports
            assert reports[0].payload["run"]["counters"]["done"] == PAGES
    finally:
        for w in workers:
            w.kill()
            w.wait(10)
        master.close()
