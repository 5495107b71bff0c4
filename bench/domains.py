"""What one verdict costs the fleet (``backend.domains.record``: one step of the proxy
tier rule per domain), on Redis and on SQLite, as a worker makes it: one call per
verdict, over a few hundred domains, mostly ``ok`` with a block now and then.

Usage (from the repository root)::

    .venv/bin/python bench/domains.py                  # 5,000 records each
    .venv/bin/python bench/domains.py --records 20000

Printed: a Markdown table of the median and p99 of one call as the client sees it (µs),
and on Redis the server's own CPU per call (``INFO commandstats`` of ``FCALL``/``EVALSHA``).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib import SMOKE_HELP, loadavg, pct, redis_server

from fleet.backends import open_backend
from fleet.core.blocks.verdicts import VerdictKind
from fleet.core.tiers import TierRule

TYPE = "bench-domains"
RULE = TierRule(tiers=3)


async def server_usec(backend: Any) -> tuple[int, float]:
    """Calls and CPU µs of every script call so far (Redis only)."""
    stats = await backend._r.info("commandstats")
    calls, usec = 0, 0.0
    for name in ("cmdstat_fcall", "cmdstat_evalsha", "cmdstat_eval"):
        if name in stats:
            calls += int(stats[name]["calls"])
            usec += float(stats[name]["usec"])
    return calls, usec


async def measure(url: str, records: int, domains: int) -> tuple[list[float], float | None]:
    b = await open_backend(url)
    rng = random.Random(7)
    try:
        names = [f"site-{i:04d}.test" for i in range(domains)]
        await b.domains.record(TYPE, names[0], tier=0, kind="ok", rule=RULE)  # loads the script
        redis = url.startswith("redis")
        before = await server_usec(b) if redis else (0, 0.0)
        took: list[float] = []
        for _ in range(records):
            kind: VerdictKind = "blocked" if rng.random() < 0.05 else "ok"
            t0 = time.perf_counter()
            await b.domains.record(TYPE, rng.choice(names), tier=0, kind=kind, rule=RULE)
            took.append((time.perf_counter() - t0) * 1e6)
        if not redis:
            return took, None
        after = await server_usec(b)
        calls = after[0] - before[0]
        return took, (after[1] - before[1]) / max(calls, 1)
    finally:
        await b.close()


async def main(args: argparse.Namespace) -> None:
    records = 200 if args.smoke else args.records
    domains = 20 if args.smoke else 500
    print(f"load average at start: {loadavg()}")
    print("| engine | records | domains | p50 µs | p99 µs | server CPU µs/call |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp, redis_server(args.url) as rurl:
        for engine, url in (("redis", rurl), ("sqlite", f"sqlite:///{Path(tmp) / 'd.db'}")):
            took, cpu = await measure(url, records, domains)
            shown = "-" if cpu is None else f"{cpu:.1f}"
            print(
                f"| {engine} | {records:,} | {domains:,} | {pct(took, 50):.1f} | "
                f"{pct(took, 99):.1f} | {shown} |"
            )
    print(f"load average at end: {loadavg()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--url", default=None, help="a Redis to use (default: a private one)")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    asyncio.run(main(parser.parse_args()))
