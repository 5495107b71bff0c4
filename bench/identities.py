"""What an identity costs a task (issue 43): a lease and a release of an identity pool,
on SQLite and on Redis, measured as the worker makes them (one ``lease`` call, one
``release`` call with the cookies a request set), pools of 10 and 1,000 identities.

Usage (from the repository root)::

    .venv/bin/python bench/identities.py                  # 2,000 lease+release pairs each
    .venv/bin/python bench/identities.py --pairs 500

Printed: a Markdown table of the pairs per second and the p50/p99 of a lease and of a
release, per engine and pool size. A task of a type without ``identity_pool`` makes
neither call (its cost is one config read in the slot: ``fleet/worker/identities.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from benchlib import SMOKE_HELP, loadavg, pct, redis_server

from fleet.backends import open_backend
from fleet.core.identities import parse_identity

COOKIE = {"name": "visits", "value": "1", "domain": "site.test", "path": "/", "expires": -1}


async def measure(url: str, pool_size: int, pairs: int) -> tuple[float, list[float], list[float]]:
    b = await open_backend(url)
    try:
        pool = f"bench-{pool_size}"
        ident = [
            parse_identity({"id": f"id-{i:05d}", "fingerprint": {"user_agent": "Bench/1"}})
            for i in range(pool_size)
        ]
        for start in range(0, pool_size, 500):
            await b.identities.put(pool, ident[start : start + 500])
        leases: list[float] = []
        releases: list[float] = []
        began = time.perf_counter()
        for _ in range(pairs):
            t0 = time.perf_counter()
            held = await b.identities.lease(pool)
            t1 = time.perf_counter()
            assert held is not None
            await b.identities.release(
                pool, held.identity.id, held.token, outcome="ok", cookies=[COOKIE]
            )
            t2 = time.perf_counter()
            leases.append((t1 - t0) * 1000)
            releases.append((t2 - t1) * 1000)
        return pairs / (time.perf_counter() - began), leases, releases
    finally:
        await b.close()


async def main(args: argparse.Namespace) -> None:
    sizes = [10, 50] if args.smoke else [10, 1000]
    pairs = 50 if args.smoke else args.pairs
    print(f"load average at start: {loadavg()}")
    print(
        "| engine | identities | pairs/s | lease p50 ms | lease p99 ms | release p50 ms "
        "| release p99 ms |"
    )
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp, redis_server(args.url) as rurl:
        for engine, url in (("sqlite", f"sqlite:///{Path(tmp) / 'ids.db'}"), ("redis", rurl)):
            for size in sizes:
                rate, leases, releases = await measure(url, size, pairs)
                print(
                    f"| {engine} | {size:,} | {rate:,.0f} | {pct(leases, 50):.3f} | "
                    f"{pct(leases, 99):.3f} | {pct(releases, 50):.3f} | {pct(releases, 99):.3f} |"
                )
    print(f"load average at end: {loadavg()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--url", default=None, help="a Redis to use (default: a private one)")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    asyncio.run(main(parser.parse_args()))
