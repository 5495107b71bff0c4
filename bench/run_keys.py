"""Runs: Redis bytes per unique key, and the run bookkeeping's cost on the drain (a
script, not a test; issue 27).

1. ``unique_key`` on Redis: ``--keys`` distinct keys (URLs) go through the run's
   filter (``lua/run_common.lua`` ``bf_seen_or_add``, the code push runs), then the
   same keys again. Reported: ``MEMORY USAGE`` of the filter's levels and ``INFO
   memory`` used_memory after minus before, per key; the false positives among the
   distinct keys (answered "seen" the first time); that every repeat is caught.
2. The drain: ``--tasks`` tasks pushed, then reserved and acked 100 at a time until
   none is left, on each backend, without a run, in a run, and in a run with a
   ``unique_key`` each. Reported: microseconds of wall time per task (push, and
   reserve + ack), and on Redis the server's CPU per task (``INFO cpu``).

    .venv/bin/python bench/run_keys.py [--keys 1000000] [--tasks 20000] [--url redis://...]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import SMOKE_HELP, loadavg, redis_server

from fleet.backends import open_backend
from fleet.backends.redis import keys as rkeys
from fleet.backends.redis.scripts import _read, with_settings
from fleet.core.records import new_id
from fleet.core.submission import make_push_request

TYPE = "runs-bench"
#: The filter's code as push runs it, driven by a loop over ARGV.
FILTER_BODY = """
local key, seen = ARGV[1], 0
for i = 2, #ARGV do
  if bf_seen_or_add(key, ARGV[i]) then seen = seen + 1 end
end
return seen
"""


def _prime_at_or_above(n: int) -> int:
    def prime(x: int) -> bool:
        return x > 1 and all(x % d for d in range(2, math.isqrt(x) + 1))

    while not prime(n):
        n += 1
    return n


def check_levels() -> None:
    """The filter's level table in run_common.lua is the formula's."""
    source = _read("run_common")
    table = re.search(r"BF_LEVELS = \{(.*?)\}\n", source, re.S)
    assert table is not None
    found = [(int(m), int(k)) for m, k in re.findall(r"\{(\d+), (\d+)\}", table.group(1))]
    want = []
    for i in range(len(found)):
        n, p = 1024 * 2**i, 2.0 ** -(30 + i)
        m = _prime_at_or_above(math.ceil(-n * math.log(p) / math.log(2) ** 2))
        want.append((m, math.ceil(-math.log2(p))))
    assert found == want, (found, want)
    print(f"filter levels: {len(found)}, as the formula gives (m prime, k = ceil(-log2 p))")


def filter_script() -> str:
    parts = [_read("queue_common"), _read("queue_groups"), _read("run_common"), FILTER_BODY]
    return with_settings("\n".join(parts))


async def bytes_per_key(url: str, n: int) -> None:
    r = aioredis.from_url(url, decode_responses=True)
    try:
        run_key = f"fleet:run:bench-{new_id()}"
        await r.hset(run_key, mapping={"state": "running"})
        before = int((await r.info("memory"))["used_memory"])
        script = r.register_script(filter_script())
        qkeys = rkeys.queue_keys(TYPE, time.time())
        first = 0
        started = time.perf_counter()
        for start in range(0, n, 1000):
            batch = [f"https://example.com/page/{i}" for i in range(start, min(start + 1000, n))]
            first += int(await script(keys=qkeys, args=[run_key, *batch]))
        took = time.perf_counter() - started
        after = int((await r.info("memory"))["used_memory"])
        levels = int(await r.hget(run_key, "kl") or 0)
        usage = 0
        for i in range(levels):
            usage += int(await r.memory_usage(f"{run_key}:keys:{i}") or 0)
        print(f"unique keys on Redis, {n:,} keys, {levels} filter levels:")
        print(f"  MEMORY USAGE of the levels: {usage:,} B = {usage / n:.2f} B/key")
        print(
            f"  used_memory after - before: {after - before:,} B = {(after - before) / n:.2f} B/key"
        )
        print(f"  false positives among distinct keys: {first} ({100 * first / n:.4f} %)")
        print(f"  {1e6 * took / n:.1f} us of script time per new key (1,000 keys per call)")
        started = time.perf_counter()
        again = 0
        for start in range(0, n, 1000):
            batch = [f"https://example.com/page/{i}" for i in range(start, min(start + 1000, n))]
            again += int(await script(keys=qkeys, args=[run_key, *batch]))
        took = time.perf_counter() - started
    finally:
        await r.aclose()
    print(f"  repeats caught: {again:,} of {n:,}, {1e6 * took / n:.1f} us per repeated key")


async def drain(url: str, tasks: int, mode: str) -> tuple[float, float]:
    """Seconds per task of pushing and of draining ``tasks`` tasks in ``mode``."""
    b = await open_backend(url)
    try:
        await b.purge_type(TYPE)
        run = None if mode == "plain" else await b.runs.create(name="bench")
        reqs = [
            make_push_request(
                {"i": i},
                run=run,
                unique_key=f"https://example.com/{i}" if mode == "unique" else None,
            )
            for i in range(tasks)
        ]
        started = time.perf_counter()
        for start in range(0, tasks, 500):
            await b.queues.push(TYPE, reqs[start : start + 500])
        pushed = time.perf_counter()
        while True:
            got = await b.queues.reserve(TYPE, k=100, visibility_seconds=60, default_max_attempts=3)
            if not got:
                break
            await b.queues.ack(TYPE, [(r.body.id, r.token) for r in got])
        drained = time.perf_counter()
        if run is not None:
            record = await b.runs.get(run)
            assert record is not None and record.state == "done", record
        return (pushed - started) / tasks, (drained - pushed) / tasks
    finally:
        await b.close()


async def redis_cpu(url: str) -> float:
    r = aioredis.from_url(url, decode_responses=True)
    try:
        info: dict[str, Any] = await r.info("cpu")
        return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
    finally:
        await r.aclose()


async def drains(url: str, name: str, tasks: int) -> None:
    for mode in ("plain", "run", "unique"):
        cpu = await redis_cpu(url) if name == "redis" else 0.0
        push, drain_s = await drain(url, tasks, mode)
        extra = ""
        if name == "redis":
            extra = f", redis CPU {1e6 * (await redis_cpu(url) - cpu) / tasks:.1f} us/task"
        print(
            f"  {name:6} {mode:6}: push {1e6 * push:6.1f} us/task, "
            f"reserve+ack {1e6 * drain_s:6.1f} us/task{extra}"
        )


async def main(args: argparse.Namespace) -> None:
    print(f"load average: {loadavg()}")
    check_levels()
    with redis_server(args.url) as url:
        await bytes_per_key(url, args.keys)
        print(f"the drain, {args.tasks:,} tasks (plain | in a run | in a run with unique_key):")
        await drains(url, "redis", args.tasks)
    with tempfile.TemporaryDirectory() as d:
        await drains(f"sqlite:///{Path(d) / 'fleet.db'}", "sqlite", args.tasks)
    await drains("memory://runs-bench", "memory", args.tasks)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--url", default=None, help="a Redis URL (default: a private server)")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    ns = parser.parse_args()
    if ns.smoke:
        ns.keys, ns.tasks = 5_000, 500
    asyncio.run(main(ns))
