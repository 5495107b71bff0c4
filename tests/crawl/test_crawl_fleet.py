"""A real crawl by a real fleet (issue 46): the README's dozen-line crawler, a real
``redis-server``, a real ``fleet master`` and two ``fleet worker`` processes of 8 slots,
against the local multi-host site (tests/crawl/site.py).

1. The README's ``titles-crawl`` (its python block saved as ``titles_crawl.py``, as its
   prose says) crawls 4 hosts of 60 pages, linked across hosts and back (cycles),
   started and watched with the README's bash lines. Host 0's robots.txt disallows
   ``/private/`` and three page ranges and asks ``Crawl-delay: 0.5``. One worker is
   killed with SIGKILL mid-crawl and started again. Every allowed page is fetched (twice
   at most for the pages the killed worker held), no disallowed one is ever asked,
   never more than 2 requests are in flight to a host as the site measures them, the
   delay holds between every two requests to host 0, robots.txt is asked once per host,
   the run ends ``done`` once and ``fleet runs watch`` exits 0 naming its pages and
   items. The crawl is started with a budget far above what it uses: a run with a
   budget has its meters sent before each ack (fleet/core/metering.py), so its figures
   survive the kill (a worker killed with SIGKILL otherwise loses its last 2 s of
   meters, as documented there) and can be checked against what the site saw.
2. ``titles-sitemap`` (the README's crawler with ``seed_from_sitemaps``), without a
   kill, on 3 hosts whose second serves a gzip sitemap naming orphan pages: every page
   fetched exactly once, orphans included, and the run's meters exact.
3. ``titles-recrawl`` (``recrawl = True``) twice over 2 hosts: the second crawl's pages
   all answer 304 (``not_modified`` is the first crawl's ``pages``).

The crawlers' config goes through the master (``fleet config set``): 8 slots and a
per-host rate of 20/s, ``per_host_concurrency`` left at its default of 2.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shlex
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from tests.crawl.site import Site, SiteSpec
from tests.docs.blocks import fenced_blocks, section
from tests.support.master_proc import MASTER_TOKEN, MasterProcess
from tests.support.waits import until
from tests.worker.procs import ROOT, WorkerProcess, fleet_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

README = (ROOT / "README.md").read_text(encoding="utf-8")
SECTION = section(README, "## A crawler in a dozen lines")
TYPES = ("titles-crawl", "titles-sitemap", "titles-recrawl")
SLOTS = 8
#: The most tasks a killed worker can have held: one per slot running and, while the
#: queue is busy, one per slot held ahead (fleet/worker/feeder.py).
HELD = 2 * SLOTS
DELAY = 0.5
SEED = "http://127.0.0.1:8765/"

#: The crawlers the README's one does not show, subclassing it (a second plugin module).
MORE_CRAWLERS = """\
from fleet.core import register
from titles_crawl import Titles


@register("titles-sitemap")
class TitlesSitemap(Titles):
    seed_from_sitemaps = True


@register("titles-recrawl")
class TitlesRecrawl(Titles):
    recrawl = True
"""


def plugin_dir(tmp_path: Path) -> Path:
    """The README's crawler saved as ``titles_crawl.py``, as its prose says, and the
    two subclasses beside it."""
    blocks = [b for b in fenced_blocks(SECTION) if b.lang == "python"]
    assert len(blocks) == 1 and blocks[0].file_name == "titles_crawl.py", blocks
    assert '@register("titles-crawl")' in blocks[0].text
    out = tmp_path / "plugins"
    out.mkdir()
    (out / "titles_crawl.py").write_text(blocks[0].text)
    (out / "titles_more.py").write_text(MORE_CRAWLERS)
    return out


def readme_lines() -> tuple[list[str], str, str]:
    """The README's bash block: its ``fleet worker`` line's arguments, its ``fleet crawl
    start`` command and its ``fleet runs watch`` line."""
    block = next(b for b in fenced_blocks(SECTION) if b.lang == "bash")
    worker, start, watch, *_ = block.lines()
    assert worker.endswith("&"), worker
    args = shlex.split(worker[:-1])
    assert args[:2] == ["fleet", "worker"], worker
    assert start.startswith("RUN=$(fleet crawl start titles-crawl ") and start.endswith(")")
    assert watch == "fleet runs watch $RUN", watch
    return args[2:], start[len("RUN=$(") : -1], watch


# -- what the crawl should do ------------------------------------------------------------


def reach(
    site: Site,
    disallowed: Callable[[int, str], bool] = lambda h, path: False,
    sitemap_hosts: Iterable[int] = (),
) -> tuple[dict[int, set[str]], int]:
    """Walk the site as a crawl seeded with every host's front page would: the paths
    fetched per host (allowed), and how many disallowed URLs it meets (skipped,
    unfollowed). Pages a sitemap names are reached too."""
    port_host = {port: h for h, port in enumerate(site.ports)}
    start = [(h, "/") for h in range(site.spec.hosts)]
    start += [(h, Site.path(i)) for h in sitemap_hosts for i in range(site.total())]
    seen = set(start)
    queue = deque(start)
    fetched: dict[int, set[str]] = {h: set() for h in range(site.spec.hosts)}
    skipped = 0
    while queue:
        h, path = queue.popleft()
        if disallowed(h, path):
            skipped += 1
            continue
        fetched[h].add(path)
        i = site.page_of(path)
        assert i is not None, path
        for href in site.hrefs(h, i):
            u = urlsplit(urljoin(site.url(h), href))
            if u.scheme != "http":
                continue
            node = (port_host[u.port or 80], u.path)
            if node not in seen:
                seen.add(node)
                queue.append(node)
    return fetched, skipped


def robots_asked(site: Site, h: int) -> int:
    with site.lock:
        return sum(1 for x in site.hits if x.host == h and x.path == "/robots.txt")


def pages_seen(site: Site) -> int:
    return sum(sum(site.fetched(h).values()) for h in range(site.spec.hosts))


# -- the fleet ---------------------------------------------------------------------------


class Fleet:
    """The master, the workers and the user's shell."""

    def __init__(self, url: str, tmp_path: Path) -> None:
        self.url = url
        self.tmp_path = tmp_path
        self.plugins = plugin_dir(tmp_path)
        self.worker_args, self.start_line, self.watch_line = readme_lines()
        self.master = MasterProcess(url, tmp_path)
        self.workers: dict[str, WorkerProcess] = {}
        self.env = fleet_env(
            FLEET_ENTRY_POINTS="0",
            PYTHONPATH=str(self.plugins),
            FLEET_MASTER_URL=self.master.url,
            FLEET_ADMIN_TOKEN=MASTER_TOKEN,
        )
        self.env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), self.env["PATH"]])
        self.restarts = 0

    def start_worker(self, wid: str) -> None:
        """The README's ``fleet worker`` line, with the other two crawler types, an id
        and the backend."""
        args = self.worker_args
        plugin = args[args.index("--plugin") + 1]
        first = args[args.index("--type") + 1]
        assert (plugin, first) == ("titles_crawl", "titles-crawl"), args
        more = ["--plugin", "titles_more", "--type", "titles-sitemap", "--type", "titles-recrawl"]
        log_dir = self.tmp_path / f"run{self.restarts}"
        log_dir.mkdir(exist_ok=True)
        self.workers[wid] = WorkerProcess(
            self.url,
            plugin,
            first,
            wid,
            log_dir,
            more_args=more,
            env={"FLEET_ENTRY_POINTS": "0", "PYTHONPATH": str(self.plugins)},
        )

    async def kill_and_restart(self, wid: str, b: Backend) -> None:
        """SIGKILL, then the same worker started again, until it is back."""
        self.workers[wid].kill9()
        self.workers[wid].close()
        self.restarts += 1
        self.start_worker(wid)
        pid = str(self.workers[wid].proc.pid)

        async def back() -> bool:
            rec = await b.workers.get(TYPES[0], wid)
            return rec is not None and rec.state.get("pid") == pid

        await until(back, timeout=30, interval=0.05, what=f"{wid} back")

    def sh(self, line: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
        """One shell line, as a user types it."""
        done = subprocess.run(
            line, shell=True, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=120
        )
        if check:
            assert done.returncode == 0, (line, done.stdout, done.stderr, self.logs())
        return done

    def crawl(self, crawler: str, seeds: list[str], *more: str) -> str:
        """The README's ``fleet crawl start`` line for ``crawler`` and ``seeds``: the run."""
        line = self.start_line.replace("titles-crawl", crawler, 1)
        line = line.replace(SEED, " ".join(shlex.quote(s) for s in seeds))
        run = self.sh(" ".join([line, *more])).stdout.strip()
        assert run and " " not in run, run
        return run

    def watch(self, run: str) -> str:
        """The README's ``fleet runs watch $RUN``: exit 0 once the run is done."""
        try:
            done = self.sh(self.watch_line.replace("$RUN", run), check=False)
        except subprocess.TimeoutExpired:
            # What the run and the workers were at, to tell why it never ended.
            with httpx.Client(
                base_url=self.master.url, headers={"Authorization": f"Bearer {MASTER_TOKEN}"}
            ) as http:
                shown = http.get(f"/api/v1/runs/{run}").text
                tasks = [
                    http.get(f"/api/v1/automations/{TYPES[0]}/tasks", params={"state": st}).text
                    for st in ("processing", "pending", "scheduled")
                ]
            raise AssertionError(
                f"run never ended: {shown}\n{[t[:2000] for t in tasks]}\n{self.logs()}"
            ) from None
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert "state     done" in done.stdout, done.stdout
        return done.stdout

    async def record(self, run: str) -> dict[str, Any]:
        """``GET /api/v1/runs/{id}``: the run and its meters."""
        async with self.master.client() as http:
            r = await http.get(f"/api/v1/runs/{run}")
            assert r.status_code == 200, r.text
            body: dict[str, Any] = r.json()
            return body

    async def meters_settle(self, run: str, expect: Mapping[str, float]) -> dict[str, Any]:
        """The run's meters once ``expect`` shows in them (a worker sends its meters
        every 2 s)."""

        async def settled() -> dict[str, Any] | None:
            meters = (await self.record(run)).get("meters") or {}
            return meters if all(meters.get(k, 0) == v for k, v in expect.items()) else None

        try:
            found: dict[str, Any] | None = await until(settled, timeout=10, interval=0.2)
        except AssertionError:
            raise AssertionError(((await self.record(run)).get("meters"), expect)) from None
        assert found is not None
        return found

    def logs(self) -> str:
        return "\n".join(f"--- {w}\n{p.log()[-3000:]}" for w, p in self.workers.items())

    def close(self) -> None:
        for w in self.workers.values():
            w.close()
        self.master.close()


@contextmanager
def fleet_of(url: str, tmp_path: Path) -> Iterator[Fleet]:
    fleet = Fleet(url, tmp_path)
    try:
        yield fleet
    finally:
        fleet.close()


async def configured(fleet: Fleet, b: Backend) -> None:
    """``fleet config set`` for each crawler type, through the master, once the workers
    registered the types; until every worker applied it."""

    async def known() -> bool:
        return all([await b.catalog.get(t) for t in TYPES])

    await until(known, timeout=30, interval=0.05, what="the crawler types registered")
    gens = {}
    for t in TYPES:
        line = f"fleet config set {t} slots={SLOTS} per_host_rate=20/s visibility_seconds=10"
        written = json.loads(fleet.sh(line + " --json").stdout)
        gens[t] = written["gen"]
        assert "per_host_concurrency" not in written["config"]

    async def applied() -> bool:
        for t, gen in gens.items():
            for wid in fleet.workers:
                rec = await b.workers.get(t, wid)
                if rec is None or rec.state.get("applied_gen") != str(gen):
                    return False
        return True

    await until(applied, timeout=30, interval=0.1, what="the config applied")


# -- the test ----------------------------------------------------------------------------


async def test_a_polite_crawl_by_a_real_fleet_through_a_worker_kill(
    redis_url: str, tmp_path: Path
) -> None:
    t0 = time.monotonic()
    with ExitStack() as sites, fleet_of(redis_url, tmp_path) as fleet:
        # Every site serves to the end: a port of one never comes back as another's
        # host (the fleet keeps each host's robots.txt and its Crawl-delay's rate).
        main, mapped, kept = (sites.enter_context(Site(s).serving()) for s in SPECS)
        await fleet.master.wait_ready()
        async with await open_backend(redis_url) as b:
            for wid in ("w1", "w2"):
                fleet.start_worker(wid)
            await configured(fleet, b)
            await killed_crawl(fleet, b, main)
            t1 = time.monotonic()
            await sitemap_crawl(fleet, mapped)
            t2 = time.monotonic()
            await recrawl(fleet, kept)
            t3 = time.monotonic()
    print(f"setup+kill crawl {t1 - t0:.1f}s, sitemap crawl {t2 - t1:.1f}s, recrawl {t3 - t2:.1f}s")


HOST0_ROBOTS = (
    "User-agent: *\nDisallow: /private/\nDisallow: /p/3\nDisallow: /p/4\nDisallow: /p/5\n"
    f"Crawl-delay: {DELAY}\n"
)


def host0_disallows(h: int, path: str) -> bool:
    return h == 0 and path.startswith(("/private/", "/p/3", "/p/4", "/p/5"))


SPECS = (
    # The killed crawl's: host 0 polite and partly closed, hosts 1 and 2 without a
    # robots.txt (a 404), host 3 allowing all.
    SiteSpec(
        hosts=4,
        pages=60,
        latency=0.05,
        robots={0: HOST0_ROBOTS, 3: "User-agent: *\nAllow: /\n"},
    ),
    # The sitemap crawl's: host 1 names its sitemap, which names 5 orphans.
    SiteSpec(
        hosts=3,
        pages=40,
        orphans=5,
        latency=0.05,
        robots={1: "User-agent: *\nDisallow: /private/\nSitemap: /sitemap.xml\n"},
        sitemap_hosts=frozenset({1}),
    ),
    # The recrawl's.
    SiteSpec(hosts=2, pages=30, latency=0.05),
)


async def killed_crawl(fleet: Fleet, b: Backend, site: Site) -> None:
    spec = site.spec
    expected, skipped = reach(site, host0_disallows)
    allowed = sum(len(p) for p in expected.values())
    assert skipped == 34 and allowed == 27 + 3 * 61, (skipped, allowed)
    seeds = [site.url(h) for h in range(spec.hosts)]
    # A budget no crawl of this site reaches: the run's meters are sent before
    # each ack, so what the killed worker did is counted (see the docstring).
    run = fleet.crawl("titles-crawl", seeds, "--budget", "requests=1e6")

    async def a_third() -> bool:
        return pages_seen(site) >= allowed // 3

    await until(a_third, timeout=60, interval=0.05, what="a third of the site")
    killed_at = time.monotonic()
    await fleet.kill_and_restart("w1", b)  # kill -9 in the middle of the crawl
    shown = fleet.watch(run)
    assert "pages " in shown and "items " in shown, shown
    record = await fleet.record(run)
    assert record["state"] == "done", record

    twice = 0
    for h in range(spec.hosts):
        got = site.fetched(h)
        assert set(got) == expected[h], (h, set(got) ^ expected[h])
        twice += sum(n - 1 for n in got.values())
        # Nothing else was asked: no disallowed page, no other status.
        with site.lock:
            other = {x.path for x in site.hits if x.host == h and x.status not in (0, 200)}
        assert other <= {"/robots.txt"}, other
        assert 1 <= robots_asked(site, h) <= 2, h
        assert site.max_in_flight(h) <= 2, (h, site.max_in_flight(h))
    assert twice <= HELD, twice
    with site.lock:
        asked0 = {x.path for x in site.hits if x.host == 0}
    assert not any(host0_disallows(0, p) for p in asked0), asked0
    assert max(site.max_in_flight(h) for h in range(1, spec.hosts)) == 2  # the cap was met
    # Host 0 asks 0.5 s between requests: held between every two of the fleet's,
    # its robots.txt among them, through the kill (5 % left to the site's threads).
    with site.lock:
        hits = sorted((x.at, x.path) for x in site.hits if x.host == 0)
    close = [
        (round(b[0] - a[0], 3), a[1], b[1], round(a[0] - killed_at, 2))
        for a, b in itertools.pairwise(hits)
        if b[0] - a[0] < 0.95 * DELAY
    ]
    assert not close, f"(gap, path, next path, since the kill): {close}"

    c = record["counters"]
    tasks = allowed + skipped
    assert c["submitted"] == c["done"] == tasks, c
    assert c["pending"] == c["running"] == c["dead"] == 0, c
    assert c["duplicates"] > 0, c
    meters = record["meters"]
    # Each page once; a page fetched twice is parsed (and metered) twice at most.
    assert allowed <= meters["pages"] <= allowed + twice, (meters, allowed, twice)
    # One item a page, but the killed worker's meters are sent with each ack of a
    # budgeted run: a task in flight at the kill may have had its page counted and
    # not yet its item (one of each slot at most).
    assert meters["pages"] - SLOTS <= meters["items"] <= meters["pages"], meters
    assert skipped <= meters["robots_skipped"] <= skipped + HELD, meters
    assert "http_errors" not in meters and "not_modified" not in meters, meters
    # Host 0's group was slowed to its Crawl-delay, fleet-wide.
    group = await b.groups.info("titles-crawl", f"127.0.0.1:{site.ports[0]}")
    assert group.settings is not None and group.settings.rate == "10/5s", group
    # The run ended once: nothing moved it after its end.
    await asyncio.sleep(1.0)
    again = await fleet.record(run)
    assert again["state"] == "done" and again["finished_at"] == record["finished_at"]
    assert again["counters"] == c, (again["counters"], c)


async def sitemap_crawl(fleet: Fleet, site: Site) -> None:
    spec = site.spec
    no_private = lambda h, path: h == 1 and path.startswith("/private/")  # noqa: E731
    expected, skipped = reach(site, no_private, sitemap_hosts=[1])
    pages = sum(len(p) for p in expected.values())
    # Orphans are reached: host 1's from its sitemap, the others' by links from them.
    assert all(Site.path(44) in expected[h] for h in range(3)) and skipped == 1
    run = fleet.crawl("titles-sitemap", [site.url(h) for h in range(spec.hosts)])
    fleet.watch(run)
    # Without a kill: each page exactly once, the sitemaps read once.
    for h in range(spec.hosts):
        read = {"/sitemap.xml", "/sitemap-pages.xml.gz"} if h == 1 else set()
        assert site.fetched(h) == {p: 1 for p in expected[h] | read}, h
        assert robots_asked(site, h) == 1, h
        assert site.max_in_flight(h) <= 2, h
    assert site.fetched(0, 404) == {"/sitemap.xml": 1} == site.fetched(2, 404)
    c = (await fleet.record(run))["counters"]
    # Its tasks: the pages, the skipped one, each seed host's /sitemap.xml and the gzip.
    assert c["submitted"] == c["done"] == pages + skipped + 4 and c["dead"] == 0, c
    expect = {"pages": pages, "items": pages, "robots_skipped": skipped, "sitemaps": 2}
    meters = await fleet.meters_settle(run, expect)
    assert "http_errors" not in meters, meters


async def recrawl(fleet: Fleet, site: Site) -> None:
    expected, _ = reach(site)
    pages = sum(len(p) for p in expected.values())
    seeds = [site.url(0), site.url(1)]
    first = fleet.crawl("titles-recrawl", seeds)
    fleet.watch(first)
    await fleet.meters_settle(first, {"pages": pages, "items": pages, "not_modified": 0})
    for h in range(2):
        assert site.fetched(h) == {p: 1 for p in expected[h]}, h
    second = fleet.crawl("titles-recrawl", seeds)
    fleet.watch(second)
    # Every page answered 304: not parsed, its kept links followed.
    meters = await fleet.meters_settle(second, {"not_modified": pages, "pages": 0})
    assert "items" not in meters, meters
    for h in range(2):
        assert site.fetched(h, 304) == {p: 1 for p in expected[h]}, h
        assert site.fetched(h) == {p: 1 for p in expected[h]}, h
        assert robots_asked(site, h) == 1, h  # kept for the fleet between crawls
    rec = await fleet.record(second)
    assert rec["counters"]["done"] == rec["counters"]["submitted"] == pages, rec
