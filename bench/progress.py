"""The cost of ``ctx.progress`` at 1,000 calls/s (a script, not a test).

``--slots`` slot contexts (default 1,000), each bound to a running task on a real
redis-server, call ``await ctx.progress(fraction, message)`` ``--rate`` times a
second each (default 1: 1,000 calls/s in all) for ``--seconds``. Reported: the
calls and the writes that reached Redis (a slot writes at most twice a second),
the caller's CPU per call and in all (% of one core), the Redis server's CPU
(``INFO cpu``) and commands per second, and the latency of a call (p50/p99).

    .venv/bin/python bench/progress.py [--slots 1000] [--rate 1] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import SMOKE_HELP, loadavg, pct, redis_server

from fleet.backends import open_backend
from fleet.core import BaseConfig, Context
from fleet.core.submission import make_push_request

TYPE = "progress-bench"


async def redis_stats(url: str) -> tuple[float, int]:
    import redis.asyncio as aioredis

    r = aioredis.Redis.from_url(url)
    try:
        cpu = await r.info("cpu")
        stats = await r.info("stats")
        used = float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])
        return used, int(stats["total_commands_processed"])
    finally:
        await r.aclose()


async def slot(ctx: Context[BaseConfig] | None, rate: float, until: float, lat: list[float]) -> int:
    """Call ``ctx.progress`` ``rate`` times a second until ``until`` (None: the
    same loop without the call, the baseline)."""
    await asyncio.sleep(random.random() / rate)  # spread the slots over the period
    calls = 0
    next_at = time.monotonic()
    while next_at < until:
        t0 = time.perf_counter()
        if ctx is not None:
            await ctx.progress((calls % 100) / 100, f"step {calls}")
        lat.append(time.perf_counter() - t0)
        calls += 1
        next_at += 1 / rate
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
    return calls


async def main(args: argparse.Namespace) -> None:
    print(f"load average: {loadavg()}")
    with redis_server(args.url) as url:
        backend: Any = await open_backend(url)
        try:
            await backend.purge_type(TYPE)
            reqs = [make_push_request({"i": i}) for i in range(args.slots)]
            await backend.queues.push(TYPE, reqs)
            got = await backend.queues.reserve(TYPE, k=args.slots, visibility_seconds=600)
            ctxs = []
            for i, r in enumerate(got):
                ctx: Context[BaseConfig] = Context(
                    backend=backend, automation_type=TYPE, config=BaseConfig, slot_id=i
                )
                ctx.bind_task(r.body.id, r.body.attempt)
                ctxs.append(ctx)
            # the loop alone (sleeps, clocks): subtracted from the caller's CPU
            base0 = time.process_time()
            until = time.monotonic() + args.seconds
            base_lat: list[float] = []
            base_calls = sum(
                await asyncio.gather(*(slot(None, args.rate, until, base_lat) for _ in ctxs))
            )
            base_cpu = (time.process_time() - base0) / max(base_calls, 1)
            lat: list[float] = []
            cpu0, wall0 = time.process_time(), time.perf_counter()
            rcpu0, rcmd0 = await redis_stats(url)
            until = time.monotonic() + args.seconds
            calls = sum(await asyncio.gather(*(slot(c, args.rate, until, lat) for c in ctxs)))
            for c in ctxs:
                await c._progress.drain()
            wall = time.perf_counter() - wall0
            cpu = time.process_time() - cpu0
            rcpu1, rcmd1 = await redis_stats(url)
            writes = sum(c._progress.writes for c in ctxs)
            info = await backend.queues.state(TYPE, got[0].body.id)
        finally:
            await backend.close()
    print(
        f"{len(ctxs):,} slots x {args.rate:g} calls/s for {wall:.1f}s: {calls:,} calls "
        f"({calls / wall:,.0f}/s), {writes:,} writes to Redis ({writes / wall:,.0f}/s)"
    )
    own = cpu / calls - base_cpu
    print(
        f"caller CPU {own * 1e6:,.1f} us/call beyond the loop's own "
        f"{base_cpu * 1e6:,.1f} us ({own * calls / wall * 100:.1f}% of a core); "
        f"redis CPU {(rcpu1 - rcpu0) / wall * 100:.1f}% of a core, "
        f"{(rcmd1 - rcmd0) / wall:,.0f} commands/s"
    )
    print(f"latency of a call p50 {pct(lat, 50) * 1e3:.2f} ms, p99 {pct(lat, 99) * 1e3:.2f} ms")
    print(f"a record's progress: {info.progress}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=1.0, help="calls per second per slot")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--url", default=None, help="a Redis URL (default: a private server)")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    ns = parser.parse_args()
    if ns.smoke:
        ns.slots, ns.seconds = 20, 1.0
    asyncio.run(main(ns))
