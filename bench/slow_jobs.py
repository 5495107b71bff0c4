"""A job like our users' jobs: each task awaits 50 ms (an HTTP call's wait), 1,000
slots in one worker process; Fleet against BullMQ at concurrency 1,000, in one run
(a script, not a test).

Rows, rounds interleaved, each on a flushed private redis-server:

- ``fleet``: ``fleet worker`` with ``slots=1000``, the job of ``bench/slow_plugin.py``;
- ``fleet +outputs``: the job also emits one output, which its task record keeps;
- ``fleet +run``: every task submitted under one run (its counters move with each task);
- ``fleet +groups``: tasks spread over 100 groups (``group=``), no limits set;
- ``bullmq-c1000``: one ``node bench/bullmq_slow_worker.js`` at concurrency 1,000, its
  job returns a small object (kept, BullMQ's default: completed jobs are kept).

Each round starts the worker on an empty queue, reads its idle RSS after 2 s, pushes N
tasks in bulk (Fleet: ``TaskQueues.push`` of 1,000; BullMQ: ``addBulk`` of 1,000) and
times the drain from the first task done to the last. Reported: tasks/s, the worker's
and redis-server's CPU per task over the drain (``INFO cpu``: the bench's own polls
included), the worker's peak RSS and memory per slot ((peak - idle) / slots).
The ceiling is slots / 50 ms = 20,000 tasks/s.

    .venv/bin/python bench/slow_jobs.py [--tasks 40000] [--rounds 3] [--slots 1000]

BullMQ comes from the peer harness' ``bullmq/`` folder (``$BULLMQ_DIR``, default
``/tmp/fleet-peers/bullmq``, set up by ``bench/run_peers.sh``); without it its row is
left out and the script says so.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import HERE, SMOKE_HELP, loadavg, redis_server, spawn, stop, worker_cmd

from fleet.backends import open_backend
from fleet.core.submission import make_push_request

TYPE = "slow"
BULLMQ_DIR = Path(os.environ.get("BULLMQ_DIR", "/tmp/fleet-peers/bullmq"))
#: How long a started worker idles before its RSS is read (and the tasks pushed).
IDLE_SECONDS = 2.0


@dataclass
class Row:
    label: str
    rate: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)
    per_slot_kb: list[float] = field(default_factory=list)
    redis_us: list[float] = field(default_factory=list)


def rss(p: psutil.Process) -> int:
    return int(p.memory_info().rss)


def cpu(p: psutil.Process) -> float:
    return float(sum(p.cpu_times()[:2]))


async def measure(
    row: Row,
    proc: subprocess.Popen[bytes],
    push: Callable[[], Awaitable[None]],
    done: Callable[[], Awaitable[int]],
    tasks: int,
    slots: int,
    url: str,
) -> None:
    """Idle RSS, push, then poll ``done`` every 20 ms until all ``tasks`` are done."""
    p = psutil.Process(proc.pid)
    r = aioredis.Redis.from_url(url)
    try:
        await asyncio.sleep(IDLE_SECONDS)
        if proc.poll() is not None:
            raise RuntimeError(f"{row.label}: the worker exited")
        idle = rss(p)
        await push()
        c0, r0 = cpu(p), await redis_cpu(r)
        peak, first, first_done = idle, None, 0
        t0 = time.perf_counter()
        while True:
            peak = max(peak, rss(p))
            n = await done()
            if n and first is None:
                first, first_done = time.perf_counter(), n
            if n >= tasks:
                break
            if proc.poll() is not None:
                raise RuntimeError(f"{row.label}: the worker exited")
            if time.perf_counter() - t0 > 300:
                raise RuntimeError(f"{row.label}: only {n} of {tasks} done after 300 s")
            await asyncio.sleep(0.02)
        t_end = time.perf_counter()
        used, redis_used = cpu(p) - c0, await redis_cpu(r) - r0
    finally:
        stop(proc)
        await r.aclose()
    assert first is not None
    row.rate.append((tasks - first_done) / max(t_end - first, 1e-9))
    row.cpu_ms.append(used / tasks * 1000)
    row.rss_mb.append(peak / 2**20)
    row.per_slot_kb.append((peak - idle) / slots / 1024)
    row.redis_us.append(redis_used / tasks * 1e6)


async def redis_cpu(r: aioredis.Redis) -> float:
    """redis-server's CPU seconds so far (``INFO cpu``)."""
    info = await r.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def fleet_round(row: Row, url: str, tasks: int, slots: int, mode: str) -> None:
    r = aioredis.Redis.from_url(url)
    await r.flushdb()
    await r.aclose()
    backend = await open_backend(url)
    try:
        await backend.configs.set(TYPE, {"slots": slots})
        env = {"EMIT": "1" if mode == "outputs" else "0"}
        proc = spawn(worker_cmd(url, "slow_plugin", TYPE), env=env)

        async def push() -> None:
            run = await backend.runs.create(name="bench") if mode == "run" else None
            for start in range(0, tasks, 1000):
                reqs = [
                    make_push_request(
                        {"i": i}, run=run, group=f"g{i % 100}" if mode == "groups" else None
                    )
                    for i in range(start, min(tasks, start + 1000))
                ]
                await backend.queues.push(TYPE, reqs)

        async def done() -> int:
            return (await backend.queues.depths(TYPE)).counters.completed

        await measure(row, proc, push, done, tasks, slots, url)
    finally:
        await backend.close()


async def bullmq_round(row: Row, url: str, tasks: int, slots: int) -> None:
    r = aioredis.Redis.from_url(url)
    await r.flushdb()
    env = {"REDIS_URL": url, "CONCURRENCY": str(slots), "BULLMQ_DIR": str(BULLMQ_DIR)}
    proc = spawn(["node", str(HERE / "bullmq_slow_worker.js")], env=env)

    async def push() -> None:
        await asyncio.to_thread(
            subprocess.run,
            ["node", str(HERE / "bullmq_slow_producer.js"), str(tasks)],
            env={**os.environ, **env},
            check=True,
            capture_output=True,
        )

    async def done() -> int:
        return int(await r.zcard("bull:slow:completed"))

    try:
        await measure(row, proc, push, done, tasks, slots, url)
    finally:
        await r.aclose()


async def main(args: argparse.Namespace) -> None:
    print(f"load average at start: {loadavg()}")
    with redis_server(args.url) as url:
        rows: list[tuple[Row, Callable[[Row], Awaitable[None]]]] = []
        for mode in args.modes:
            label = f"fleet, slots={args.slots}" + ("" if mode == "plain" else f" +{mode}")
            rows.append(
                (Row(label), lambda r, m=mode: fleet_round(r, url, args.tasks, args.slots, m))
            )
        if (BULLMQ_DIR / "node_modules" / "bullmq").is_dir() and shutil.which("node"):
            rows.append(
                (
                    Row(f"bullmq, concurrency={args.slots}"),
                    lambda r: bullmq_round(r, url, args.tasks, args.slots),
                )
            )
        else:
            print(f"no BullMQ at {BULLMQ_DIR} (bench/run_peers.sh sets it up): its row is left out")
        for rnd in range(args.rounds):
            for row, run in rows:
                await run(row)
                print(
                    f"round {rnd + 1}: {row.label}: {row.rate[-1]:,.0f} tasks/s, worker CPU "
                    f"{row.cpu_ms[-1]:.3f} ms/task, peak RSS {row.rss_mb[-1]:.0f} MB, "
                    f"{row.per_slot_kb[-1]:.1f} KB/slot, Redis {row.redis_us[-1]:.0f} µs/task",
                    flush=True,
                )
    print(f"load average at end: {loadavg()}")
    med = statistics.median
    print(
        f"\nmedians of {args.rounds} round(s), {args.tasks:,} tasks of "
        f"{os.environ.get('SLEEP_MS', '50')} ms:\n"
    )
    print(
        "| row | tasks/s | worker CPU ms/task | Redis CPU µs/task "
        "| peak RSS MB | memory per slot KB |"
    )
    print("|---|---|---|---|---|---|")
    for row, _ in rows:
        print(
            f"| {row.label} | {med(row.rate):,.0f} | {med(row.cpu_ms):.3f} | "
            f"{med(row.redis_us):.0f} | "
            f"{med(row.rss_mb):.0f} | {med(row.per_slot_kb):.1f} |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=40_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--slots", type=int, default=1000)
    parser.add_argument(
        "--modes",
        nargs="+",
        default=["plain", "outputs", "run", "groups"],
        choices=["plain", "outputs", "run", "groups"],
    )
    parser.add_argument("--url", help="a Redis to use (flushed!) instead of a private one")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.tasks, args.rounds, args.slots = 200, 1, 50
        IDLE_SECONDS = 0.5
    asyncio.run(main(args))
