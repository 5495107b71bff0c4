"""Crawls: pages per second of one local crawl, Fleet's ``Crawler`` against the plain
run recipe of docs/runs.md ("A crawl as a run"), same site, backend and worker slots.

Usage (from the repository root)::

    .venv/bin/python bench/crawl.py                      # Redis (a private server), ~50 s
    .venv/bin/python bench/crawl.py --backend sqlite --rounds 3
    .venv/bin/python bench/crawl.py --hosts 4 --pages 500 --slots 16 --latency 0.005
    .venv/bin/python bench/crawl.py --shared-ssl         # what one SSL context a worker buys

The site is ``tests/crawl/site.py`` (``--hosts`` hosts of ``--pages`` pages, each page
linking to its two children, its parent, its host's front page, the same page of the
next host and a ``/private/secret``; no robots.txt), served by threads of this process.
Each round, for each recipe: a fresh backend (Redis ``FLUSHDB``, or a new SQLite file),
the type's config set, one ``fleet worker`` process started (``--slots`` slots) and
registered, then a run is created and seeded with each host's front page; the clock
runs from the seeds' push to the run's end. Checked: every page of the site was
fetched exactly once (the site counts its requests).

- **Crawler**: type ``bench-crawler``, a ``Crawler`` whose ``parse`` emits one item
  per page and yields ``page.links()``; per-host groups loosened so that they do not
  bound it: ``per_host_concurrency`` 8, ``per_host_rate`` ``1000/s``; robots.txt read
  once per host (a 404 here).
- **plain recipe**: type ``bench-crawl-page``, the ``CrawlPage`` of docs/runs.md as
  printed there (a new ``httpx.AsyncClient`` per page, links by a regular expression,
  ``ctx.submit(..., unique_key=url)`` one link at a time), no group; its ``site``
  prefix is ``http://127.0.0.1:``, which takes in every host of the local site.

``--shared-ssl``: the worker builds httpx's default SSL context once and hands every
new transport that one (a patch of httpx in the worker, for this measurement only):
the rows show what building one per client costs each recipe.

The module doubles as the plugin the workers load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import httpx
from pydantic import BaseModel

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _p in (str(HERE), str(ROOT)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from fleet.core import BaseConfig, BatchAutomation, Context, Queue, Task, register  # noqa: E402
from fleet.crawl import CrawlConfig, Crawler, Link  # noqa: E402

CRAWLER = "bench-crawler"
PLAIN = "bench-crawl-page"
#: The plain recipe's ``site``: a prefix every host of the local site shares.
SITE_PREFIX = "http://127.0.0.1:"
SHARED_SSL_ENV = "FLEET_BENCH_SHARED_SSL"


def _share_ssl_context() -> None:
    """Every httpx transport built with the default ``verify`` gets one SSL context,
    built once (httpx builds one per transport: certifi's bundle read each time)."""
    import httpx._transports.default as transports

    names = vars(transports)
    build = names["create_ssl_context"]
    shared: list[Any] = []

    def create_ssl_context(verify: Any = True, cert: Any = None, trust_env: bool = True) -> Any:
        if verify is True and cert is None:
            if not shared:
                shared.append(build(verify=True, trust_env=trust_env))
            return shared[0]
        return build(verify=verify, cert=cert, trust_env=trust_env)

    names["create_ssl_context"] = create_ssl_context


if os.environ.get(SHARED_SSL_ENV) == "1":
    _share_ssl_context()


class Fetched(BaseModel):
    url: str
    links: int


# -- (a) Fleet's Crawler ----------------------------------------------------------------


@register(CRAWLER)
class BenchCrawler(Crawler[CrawlConfig]):
    Config = CrawlConfig
    Output = Fetched

    async def parse(self, page: Any, ctx: Any) -> Any:
        links = page.links()
        yield Fetched(url=page.url, links=len(links))
        for url in links:
            yield Link(url)


# -- (b) the plain run recipe of docs/runs.md, as printed there ---------------------


class PlainPage(BaseModel):
    url: str
    site: str  # only links under this prefix are followed


PAGES = Queue(PLAIN, payload=PlainPage)
LINK = re.compile(r'href="([^"#]+)"')


@register(PLAIN)
class CrawlPage(BatchAutomation[BaseConfig]):
    Config = BaseConfig
    TaskPayload = PlainPage
    Output = Fetched

    async def run_one(self, task: Task[PlainPage], ctx: Context[BaseConfig]) -> None:
        page = task.payload
        async with httpx.AsyncClient(timeout=10) as http:
            response = await http.get(page.url)
            response.raise_for_status()
        links = {urljoin(page.url, href) for href in LINK.findall(response.text)}
        for url in sorted(links):
            if url.startswith(page.site):
                await ctx.submit(PAGES, PlainPage(url=url, site=page.site), unique_key=url)
        await ctx.emit(Fetched(url=page.url, links=len(links)))


# -- the bench --------------------------------------------------------------------------


@dataclass
class Row:
    label: str
    pages: int
    seconds: float
    worker_ms: float  # the worker's CPU per page
    redis_us: float  # Redis' CPU per page (0: not Redis)
    duplicates: int

    @property
    def rate(self) -> float:
        return self.pages / self.seconds


def labels(slots: int) -> dict[str, str]:
    return {
        CRAWLER: f"Crawler, slots={slots}, per_host_concurrency=8, per_host_rate=1000/s",
        PLAIN: f"plain recipe (docs/runs.md), slots={slots}, no group",
    }


def configs(slots: int) -> dict[str, dict[str, Any]]:
    return {
        CRAWLER: {"slots": slots, "per_host_concurrency": 8, "per_host_rate": "1000/s"},
        PLAIN: {"slots": slots},
    }


async def one_crawl(kind: str, url: str, spec: Any, slots: int, shared_ssl: bool, tmp: Path) -> Row:
    import psutil
    import redis.asyncio as aioredis
    from benchlib import redis_cpu, spawn, stop, worker_cmd

    from fleet.backends import open_backend
    from fleet.core.submission import make_push_request
    from fleet.crawl import seed_task
    from tests.crawl.site import Site

    if url.startswith("redis"):
        r = aioredis.from_url(url)
        await r.flushdb()
    else:
        r = None
        url = f"sqlite:///{tmp / f'crawl-{time.monotonic_ns()}.db'}"
    backend = await open_backend(url)
    try:
        await backend.configs.set(kind, configs(slots)[kind])
        with Site(spec).serving() as site:
            env = {SHARED_SSL_ENV: "1" if shared_ssl else "0"}
            proc = spawn(worker_cmd(url, "crawl", kind, "bench-crawl"), env=env)
            try:
                deadline = time.monotonic() + 60
                while not await backend.workers.ids(kind):
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit(f"the {kind} worker did not start")
                    await asyncio.sleep(0.05)
                worker = psutil.Process(proc.pid)
                cpu0 = sum(worker.cpu_times()[:2])
                redis0 = await redis_cpu(r) if r is not None else 0.0
                run_id = await backend.runs.create(name="bench-crawl")
                starts = [site.url(h) for h in range(spec.hosts)]
                if kind == CRAWLER:
                    hosts = sorted({seed_task(u)[1] for u in starts})
                    requests = []
                    for u in starts:
                        key, group, job = seed_task(u, hosts=hosts)
                        requests.append(
                            make_push_request(
                                job.model_dump(mode="json"), group=group, run=run_id, unique_key=key
                            )
                        )
                else:
                    requests = [
                        make_push_request({"url": u, "site": SITE_PREFIX}, run=run_id, unique_key=u)
                        for u in starts
                    ]
                t0 = time.perf_counter()
                await backend.queues.push(kind, requests)
                while True:
                    run = await backend.runs.get(run_id)
                    if run is not None and run.state != "running":
                        break
                    if proc.poll() is not None:
                        raise SystemExit(f"the {kind} worker exited")
                    if time.perf_counter() - t0 > 600:
                        raise SystemExit(f"the {kind} crawl did not end within 600 s")
                    await asyncio.sleep(0.02)
                seconds = time.perf_counter() - t0
                cpu = sum(worker.cpu_times()[:2]) - cpu0
                redis_s = (await redis_cpu(r) - redis0) if r is not None else 0.0
            finally:
                stop(proc)
            expected = {Site.path(i) for i in range(spec.pages)} | {"/private/secret"}
            pages = 0
            for h in range(spec.hosts):
                got: Counter[str] = site.fetched(h)
                if got != dict.fromkeys(expected, 1):
                    missing = sorted(expected - set(got))[:5]
                    twice = sorted(p for p, n in got.items() if n > 1)[:5]
                    extra = sorted(set(got) - expected)[:5]
                    raise SystemExit(
                        f"{kind}: host {h}: missing {missing}, fetched twice {twice}, "
                        f"not pages {extra}"
                    )
                pages += sum(got.values())
        assert run is not None
        if run.state != "done":
            raise SystemExit(f"{kind}: the run ended {run.state}")
        return Row(
            labels(slots)[kind],
            pages,
            seconds,
            cpu / pages * 1e3,
            redis_s / pages * 1e6,
            int(run.counters.get("duplicates", 0)),
        )
    finally:
        await backend.close()
        if r is not None:
            await r.aclose()


def median_row(rows: list[Row]) -> Row:
    return Row(
        rows[0].label,
        rows[0].pages,
        statistics.median(r.seconds for r in rows),
        statistics.median(r.worker_ms for r in rows),
        statistics.median(r.redis_us for r in rows),
        rows[0].duplicates,
    )


async def main(args: argparse.Namespace) -> None:
    from benchlib import loadavg, redis_server

    from tests.crawl.site import SiteSpec

    spec = SiteSpec(hosts=args.hosts, pages=args.pages, latency=args.latency)
    print(f"load average at start: {loadavg()}")
    ssl_note = (
        "one SSL context per worker (--shared-ssl)"
        if args.shared_ssl
        else ("httpx's default: an SSL context per client")
    )
    print(
        f"{args.hosts} hosts x {args.pages} pages (+ /private/secret each), latency "
        f"{args.latency:g} s, backend {args.backend}, one worker process, {args.slots} "
        f"slots, {args.rounds} round(s), {ssl_note}"
    )
    results: dict[str, list[Row]] = {CRAWLER: [], PLAIN: []}
    with tempfile.TemporaryDirectory() as d, redis_server(args.url) as redis_url:
        url = redis_url if args.backend == "redis" else "sqlite"
        for rnd in range(args.rounds):
            # Alternate which recipe goes first, so neither always meets a warmer machine.
            order = [CRAWLER, PLAIN] if rnd % 2 == 0 else [PLAIN, CRAWLER]
            for kind in order:
                row = await one_crawl(kind, url, spec, args.slots, args.shared_ssl, Path(d))
                results[kind].append(row)
                print(
                    f"round {rnd + 1} {kind}: {row.pages:,} pages in {row.seconds:.2f} s, "
                    f"{row.rate:,.1f} pages/s, worker {row.worker_ms:.2f} ms CPU/page",
                    flush=True,
                )
    medians = {kind: median_row(rows) for kind, rows in results.items()}
    redis = args.backend == "redis"
    print()
    print(
        "| recipe (real settings) | pages fetched once | s (median) | pages/s | "
        "worker ms CPU/page | " + ("Redis µs CPU/page | " if redis else "") + "run duplicates |"
    )
    print("|---|---|---|---|---|" + ("---|" if redis else "") + "---|")
    for row in medians.values():
        redis_cell = f" {row.redis_us:,.0f} |" if redis else ""
        print(
            f"| {row.label} | {row.pages:,} | {row.seconds:.2f} | {row.rate:,.1f} | "
            f"{row.worker_ms:.2f} |{redis_cell} {row.duplicates:,} |"
        )
    ratio = medians[CRAWLER].rate / medians[PLAIN].rate
    print(f"\nCrawler / plain recipe, pages/s: {ratio:.2f}x")
    print(f"load average at end: {loadavg()}")


if __name__ == "__main__":
    from benchlib import SMOKE_HELP

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--pages", type=int, default=200, help="pages per host")
    parser.add_argument("--slots", type=int, default=16)
    parser.add_argument("--backend", choices=("redis", "sqlite"), default="redis")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds the site takes a page")
    parser.add_argument(
        "--shared-ssl", action="store_true", help="one SSL context per worker (see above)"
    )
    parser.add_argument("--url", default=None, help="use this Redis (it is flushed!)")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    ns = parser.parse_args()
    if ns.smoke:
        ns.hosts, ns.pages, ns.rounds = 2, 20, 1
    asyncio.run(main(ns))
