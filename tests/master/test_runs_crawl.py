"""A real crawl as a run (issue 27), with the code of docs/runs.md as written.

A local site of 300 linked pages with cycles; a real ``fleet master`` and two
``fleet worker`` processes running the page's ``crawl.py`` (on SQLite and Redis); the run is
created and seeded with the page's ``fleet runs create`` / ``fleet submit --run``
lines and watched with ``fleet runs watch``. One worker is killed with SIGKILL during
the crawl and started again. Every page is fetched (at least once: a page fetched
twice was redelivered after the kill), the run ends ``done`` once, the report (the
run's ``on_complete``) is emitted once, and ``duplicates`` counts the links that led
back to pages already seen. (The issue asks 2,000 pages and several kills; this
scale runs in well under a minute here.)
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core.runs import callback_task_id
from tests.docs.blocks import fenced_blocks
from tests.support.master_proc import MASTER_TOKEN, MasterProcess
from tests.support.waits import until
from tests.worker.procs import ROOT, fleet_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

PAGES = 300
RUNS_PAGE = (ROOT / "docs" / "runs.md").read_text(encoding="utf-8")


def links_of(i: int) -> list[int]:
    """Page i links to its two children (a tree), its parent and the front page
    (cycles), and to a page a third of the way round (more cycles)."""
    out = [c for c in (2 * i + 1, 2 * i + 2) if c < PAGES]
    return [*out, i // 2, 0, (i + PAGES // 3) % PAGES]


def href(i: int) -> str:
    """The path of page i: the front page is the site's root, the seed's URL."""
    return "/" if i == 0 else f"/p/{i}"


class Site:
    """The pages over real HTTP, counting the fetches of each."""

    def __init__(self) -> None:
        self.fetches: Counter[int] = Counter()
        self.lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                try:
                    i = int(self.path.rsplit("/", 1)[-1] or 0)
                except ValueError:
                    i = -1
                if not 0 <= i < PAGES:
                    self.send_error(404)
                    return
                with site.lock:
                    site.fetches[i] += 1
                time.sleep(0.01)
                hrefs = "".join(f'<a href="{href(j)}">{j}</a>' for j in links_of(i))
                body = f"<html><body>page {i} {hrefs}</body></html>".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/"

    def fetched(self) -> int:
        with self.lock:
            return len(self.fetches)


@pytest.fixture
def site() -> Iterator[Site]:
    s = Site()
    s.thread.start()
    yield s
    s.server.shutdown()
    s.server.server_close()


def crawl_module(tmp_path: Path) -> Path:
    """The page's block saved as ``crawl.py``, as its prose says."""
    blocks = [b for b in fenced_blocks(RUNS_PAGE) if b.file_name == "crawl.py"]
    assert len(blocks) == 1
    (tmp_path / "crawl.py").write_text(blocks[0].text)
    return tmp_path


def doc_lines() -> list[str]:
    """The page's shell lines that create, seed and watch the run."""
    block = next(b for b in fenced_blocks(RUNS_PAGE) if "fleet runs create" in b.text)
    return block.lines()


def cli(env: dict[str, str], line: str, site: Site, run: str = "") -> str:
    """One of the page's lines, its site and run filled in, run as a user would."""
    line = line.replace("http://127.0.0.1:8765/", site.root).replace("$RUN", run)
    done = subprocess.run(
        line, shell=True, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, (line, done.stdout, done.stderr)
    return done.stdout


def start_worker(url: str, wid: str, env: dict[str, str], log_dir: Path) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "fleet", "worker", "--plugin", "crawl", "--id", wid]
    args += ["--type", "crawl-page", "--type", "crawl-report", "--backend", url]
    with (log_dir / f"{wid}.log").open("ab") as log:  # the child keeps its own copy
        return subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


async def _until(what: str, check: Any, timeout: float) -> None:
    await until(check, timeout=timeout, interval=0.1, what=what)


async def registered(backend: Backend, automation_type: str) -> None:
    """Wait for a starting worker to register ``automation_type`` (a run's
    ``on_complete`` must name a type the fleet knows, as the page says)."""
    await until(
        lambda: backend.catalog.get(automation_type),
        timeout=30,
        interval=0.05,
        what=f"{automation_type} to be registered",
    )


async def test_a_crawl_run_ends_once_through_a_worker_kill(
    site: Site, tmp_path: Path, shared_url: str
) -> None:
    url = shared_url
    plugin_dir = crawl_module(tmp_path)
    pythonpath = os.pathsep.join([str(plugin_dir), str(ROOT)])
    env = fleet_env(FLEET_ENTRY_POINTS="0", PYTHONPATH=pythonpath)
    lines = doc_lines()
    assert lines[0].startswith("fleet worker --plugin crawl")
    master = MasterProcess(url, tmp_path)
    workers: list[subprocess.Popen[bytes]] = []
    user = {**env, "FLEET_MASTER_URL": master.url, "FLEET_ADMIN_TOKEN": MASTER_TOKEN}
    user["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
    try:
        await master.wait_ready()
        async with await open_backend(url) as b:
            await b.configs.set("crawl-page", {"slots": 4, "visibility_seconds": 10})
            workers = [start_worker(url, w, env, tmp_path) for w in ("w1", "w2")]
            await registered(b, "crawl-report")
            run = cli(user, lines[1].split("=", 1)[1].strip("$()"), site).strip()
            cli(user, lines[2], site, run)
            await _until("a third of the site", lambda: _ready(site.fetched() >= PAGES // 3), 60)
            workers[0].kill()  # kill -9 in the middle of the crawl
            workers[0].wait(10)
            workers[0] = start_worker(url, "w1", env, tmp_path)
            shown = cli(user, lines[3], site, run)  # fleet runs watch: returns when it ended
            assert "done" in shown
            record = await b.runs.get(run)
            assert record is not None and record.state == "done", record
            c = record.counters
            assert sorted(site.fetches) == list(range(PAGES)), "every page fetched"
            assert c["submitted"] == PAGES and c["done"] == PAGES, c
            assert c["pending"] == c["running"] == c["dead"] == 0, c
            # Each page submits each distinct link once; all but the pages queued are
            # duplicates. A page run again after the kill submits its links again.
            expected = sum(len(set(links_of(i))) for i in range(PAGES)) - (PAGES - 1)
            rerun = sum(len(set(links_of(i))) for i, n in site.fetches.items() if n > 1)
            assert expected <= c["duplicates"] <= expected + rerun, (c, expected, rerun)
            await _until("the report", lambda: _reported(b, run), 30)
            await asyncio.sleep(1.0)  # a second report would have shown by now
            reports = await b.streams.read("crawl-report", n=10)
            assert len(reports) == 1, reports
            assert reports[0].payload["run"]["run_id"] == run
            assert reports[0].payload["run"]["counters"]["done"] == PAGES
            again = await b.runs.get(run)
            assert again is not None and again.finished_at == record.finished_at
    finally:
        for w in workers:
            w.kill()
            w.wait(10)
        master.close()


async def _ready(value: bool) -> bool:
    return value


async def _reported(b: Any, run: str) -> bool:
    info = await b.queues.state("crawl-report", callback_task_id(run))
    return bool(info.state == "done")
