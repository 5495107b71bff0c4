"""What slots calling at once cost on Redis: ``ctx.submit`` from 1 and from 100
concurrent submitters, and bursts of ``ctx.emit``-style stream pushes (each with its
task record), on a private redis-server (a script, not a test).

Reports per call: calls/s, this process' CPU and redis-server's CPU (``INFO cpu``),
and for the emits the number of script calls Redis ran (``INFO commandstats``).
Single pushes and emits made while one is in flight are batched
(``TaskQueues.push_one``, ``RedisStreams.push``): with one caller nothing is
gathered, with many one script call serves all that waited.

    .venv/bin/python bench/batching.py [--submits 40000] [--bursts 40] [--burst 250]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import SMOKE_HELP, loadavg, redis_cpu, redis_server
from noop_plugin import Noop

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core import BaseConfig, Context, Queue


async def script_calls(r: aioredis.Redis) -> int:
    stats = await r.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("fcall", "evalsha"))


async def submits(b: Backend, r: aioredis.Redis, n: int, submitters: int) -> None:
    config = BaseConfig()
    queue = Queue("noop", payload=Noop)
    ctxs = [
        Context(backend=b, automation_type="producer", config=lambda: config, slot_id=i)
        for i in range(submitters)
    ]
    await ctxs[0].submit(queue, Noop(i=0))  # connected, script loaded

    async def slot(ctx: Context[BaseConfig], k: int) -> None:
        for i in range(k):
            await ctx.submit(queue, Noop(i=i))

    per = n // submitters
    r0, c0, t0 = await redis_cpu(r), time.process_time(), time.perf_counter()
    await asyncio.gather(*(slot(c, per) for c in ctxs))
    dt, cpu, rcpu = time.perf_counter() - t0, time.process_time() - c0, await redis_cpu(r) - r0
    total = per * submitters
    print(
        f"ctx.submit, {submitters} submitter(s): {total / dt:,.0f}/s, producer CPU "
        f"{cpu / total * 1e6:.0f} µs, Redis CPU {rcpu / total * 1e6:.0f} µs per submit",
        flush=True,
    )


async def emits(b: Backend, r: aioredis.Redis, bursts: int, burst: int) -> None:
    await b.streams.push("bench", {"w": 1}, worker_id="w", task_id="warm", attempt=1)
    calls0, r0, c0 = await script_calls(r), await redis_cpu(r), time.process_time()
    t0 = time.perf_counter()
    for k in range(bursts):
        await asyncio.gather(
            *(
                b.streams.push("bench", {"i": i}, worker_id="w", task_id=f"t{k}-{i}", attempt=1)
                for i in range(burst)
            )
        )
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    rcpu, calls = await redis_cpu(r) - r0, await script_calls(r) - calls0
    n = bursts * burst
    print(
        f"emits, {bursts} bursts of {burst}: {n / dt:,.0f}/s, {calls:,} script calls, client "
        f"CPU {cpu / n * 1e6:.0f} µs, Redis CPU {rcpu / n * 1e6:.0f} µs per emit",
        flush=True,
    )


async def main(args: argparse.Namespace) -> None:
    print(f"load average at start: {loadavg()}")
    with redis_server(args.url) as url:
        r = aioredis.Redis.from_url(url)
        for submitters in (1, 100):
            await r.flushdb()
            b = await open_backend(url)
            try:
                await submits(b, r, args.submits // (2 if submitters == 1 else 1), submitters)
            finally:
                await b.close()
        await r.flushdb()
        b = await open_backend(url)
        try:
            await emits(b, r, args.bursts, args.burst)
        finally:
            await b.close()
            await r.aclose()
    print(f"load average at end: {loadavg()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--submits", type=int, default=40_000)
    parser.add_argument("--bursts", type=int, default=40)
    parser.add_argument("--burst", type=int, default=250)
    parser.add_argument("--url", help="a Redis to use (flushed!) instead of a private one")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.submits, args.bursts, args.burst = 400, 2, 50
    asyncio.run(main(args))
