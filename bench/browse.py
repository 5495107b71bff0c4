"""The task browser's page at two sizes of one type, on SQLite and on Redis (issue 41,
item 4): a page must cost the same at 20,000 and at 1,000,000 tasks.

Usage (from the repository root)::

    .venv/bin/python bench/browse.py                     # 20,000 and 1,000,000 tasks
    .venv/bin/python bench/browse.py --sizes 20000 --pages 200

For each engine and size, one type is filled with that many tasks spread over the
four states the browser filters on (55 % pending, 15 % scheduled, 15 % processing,
15 % dead), then each state is read as the dashboard reads it: pages of 50, from the
newest and from cursors spread over the whole state (a walk's later pages). Printed: a
Markdown table of the first page's time (on Redis, a live state's first page builds
the indexes of a type nobody browsed), p50 and p99 per page after it, and the ratio of
the p99s of the two sizes.
Redis is a private ``redis-server`` (or ``--url``), SQLite a file in a temporary folder.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from pathlib import Path

from benchlib import SMOKE_HELP, loadavg, pct, redis_server

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core.capabilities.browse import (
    BROWSE_STATES,
    BrowseState,
    Position,
    encode_cursor,
)
from fleet.core.records import PushRequest, TaskBody

TYPE = "browse-bench"
LIMIT = 50
SHARES = {"pending": 0.55, "scheduled": 0.15, "processing": 0.15, "dead": 0.15}
BATCH = 1000


def _requests(start: int, n: int, delay: float) -> list[PushRequest]:
    return [
        PushRequest(
            TaskBody(
                id=f"{i:08x}{random.getrandbits(64):016x}",
                payload={"i": i},
                priority=(i % 3) - 1,
                group=None if i % 4 else f"g{i % 40}",
                enqueued_at=1_767_000_000.0 + i * 0.001,
                max_attempts=5,
            ),
            delay_seconds=delay,
        )
        for i in range(start, start + n)
    ]


async def fill(b: Backend, n: int) -> float:
    """Fill TYPE with n tasks; the submit time of the newest."""
    i = 0

    async def push(count: int, delay: float) -> None:
        nonlocal i
        for start in range(0, count, BATCH):
            m = min(BATCH, count - start)
            await b.queues.push(TYPE, _requests(i, m, delay))
            i += m

    # processing and dead first: reserved out of an empty queue, then the rest waits
    n_proc, n_dead = int(n * SHARES["processing"]), int(n * SHARES["dead"])
    await push(n_proc + n_dead, 0.0)
    left = n_proc + n_dead
    while left > 0:
        got = await b.queues.reserve(TYPE, k=min(BATCH, left), visibility_seconds=86_400.0)
        if not got:
            break
        left -= len(got)
        dead = got[: max(0, min(len(got), n_dead))]
        n_dead -= len(dead)
        await asyncio.gather(
            *(b.queues.nack(TYPE, r.body.id, r.token, delay_seconds=0.0, dead=True) for r in dead)
        )
    await push(int(n * SHARES["scheduled"]), 86_400.0)
    await push(n - i, 0.0)
    return 1_767_000_000.0 + i * 0.001


async def pages(
    b: Backend, state: BrowseState, newest: float, samples: int
) -> tuple[float, list[float]]:
    """The time (s) of the state's first page after the fill (on Redis it loads the
    script and, for a live state, builds the indexes of a type nobody browsed), then
    those of `samples` pages: the first, and from cursors spread over the state's
    submit times (some before its oldest: short last pages)."""
    times: list[float] = []
    t0 = time.perf_counter()
    await b.browse.page(TYPE, state, LIMIT, None)
    first = time.perf_counter() - t0
    rng = random.Random(7)
    for k in range(samples):
        cursor = None
        if k % 10:
            at = 1_767_000_000.0 + rng.random() * (newest - 1_767_000_000.0)
            cursor = encode_cursor(Position(at, "f" * 24))
        t0 = time.perf_counter()
        await b.browse.page(TYPE, state, LIMIT, cursor)
        times.append(time.perf_counter() - t0)
    return first, times


Row = tuple[str, int, str, float, float, float]


async def measure(url: str, sizes: list[int], samples: int) -> list[Row]:
    rows: list[Row] = []
    for n in sizes:
        async with await open_backend(url) as b:
            await b.purge_type(TYPE)
            t0 = time.perf_counter()
            newest = await fill(b, n)
            fill_s = time.perf_counter() - t0
            depths = await b.queues.depths(TYPE)
            pending = depths.high + depths.normal + depths.low
            print(
                f"  {url.split(':')[0]} {n:,} tasks filled in {fill_s:.1f} s (pending "
                f"{pending:,}, scheduled {depths.scheduled:,}, processing "
                f"{depths.processing:,}, dead {depths.dead:,})",
                flush=True,
            )
            for state in BROWSE_STATES:
                first, t = await pages(b, state, newest, samples)
                engine = url.split(":")[0]
                rows.append((engine, n, state, first * 1e3, pct(t, 50) * 1e3, pct(t, 99) * 1e3))
            await b.purge_type(TYPE)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[20_000, 1_000_000])
    ap.add_argument("--pages", type=int, default=300, help="pages timed per state and size")
    ap.add_argument("--url", help="a Redis URL (default: a private redis-server)")
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = ap.parse_args()
    if args.smoke:
        args.sizes, args.pages = [200, 2_000], 20
    print(f"load average {loadavg()}; pages of {LIMIT}, {args.pages} per state and size")
    with redis_server(args.url) as redis_url, tempfile.TemporaryDirectory() as tmp:
        rows = []
        for url in (f"sqlite:///{Path(tmp) / 'browse.db'}", redis_url):
            rows += asyncio.run(measure(url, args.sizes, args.pages))
    small, big = min(args.sizes), max(args.sizes)
    p99 = {(e, n, s): hi for e, n, s, _, _, hi in rows}
    print(
        f"\n| engine | state | tasks | first page ms | page p50 ms | page p99 ms "
        f"| p99 {big:,} / {small:,} |"
    )
    print("|---|---|---|---|---|---|---|")
    for e, n, s, first, lo, hi in rows:
        ratio = f"{hi / p99[(e, small, s)]:.2f}x" if n == big and n != small else ""
        print(f"| {e} | {s} | {n:,} | {first:.1f} | {lo:.2f} | {hi:.2f} | {ratio} |")


if __name__ == "__main__":
    main()
