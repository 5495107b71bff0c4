"""Micro-benchmarks of the Redis backend (a script, not a test).

Starts its own ``redis-server`` on a free port (or uses ``--url``) and prints:
push tasks/s (one call per task, and batched), reserve+ack tasks/s (k=1 and
batched), pool claim latency p50/p99 at 1k and 100k items, and the Redis
command rate of 10 idle blocked reserve loops.

    .venv/bin/python bench/redis_micro.py [--url redis://127.0.0.1:6390/0] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from benchlib import SMOKE_HELP, redis_server

from fleet.backends.redis import RedisBackend
from fleet.core.records import PushRequest, TaskBody, new_id


def bodies(n: int) -> list[PushRequest]:
    return [PushRequest(TaskBody(id=new_id(), payload={"n": i})) for i in range(n)]


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


async def redis_cpu(b: RedisBackend) -> float:
    info = await b._r.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


class Meter:
    """Wall time plus CPU time of this process and of redis-server, so results
    can be judged on a machine shared with other work."""

    def __init__(self, b: RedisBackend) -> None:
        self.b = b

    async def __aenter__(self) -> Meter:
        self.wall = time.perf_counter()
        self.cpu = time.process_time()
        self.rcpu = await redis_cpu(self.b)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu
        self.rcpu = await redis_cpu(self.b) - self.rcpu

    def line(self, label: str, n: int) -> str:
        client_us = self.cpu / n * 1e6
        redis_us = self.rcpu / n * 1e6
        return (
            f"{label:34} {n / self.wall:10,.0f} tasks/s   "
            f"(CPU per task: client {client_us:5.1f} us + redis {redis_us:5.1f} us)"
        )


async def bench_push(b: RedisBackend, n_single: int, n_batch: int) -> None:
    reqs = bodies(n_single)
    async with Meter(b) as m:
        for r in reqs:
            await b.queues.push("bench-push", [r])
    print(m.line("push, one call per task:", n_single))
    reqs = bodies(n_batch)
    async with Meter(b) as m:
        for i in range(0, n_batch, 1000):
            await b.queues.push("bench-push", reqs[i : i + 1000])
    print(m.line("push, batches of 1000:", n_batch))
    await b.purge_type("bench-push")


async def bench_drain(b: RedisBackend, n: int, k: int, loops: int = 1) -> None:
    t = f"bench-drain-{k}-{loops}"
    for i in range(0, n, 1000):
        await b.queues.push(t, bodies(min(1000, n - i)))
    done = 0

    async def drain() -> None:
        nonlocal done
        while True:
            got = await b.queues.reserve(t, k=k, visibility_seconds=60)
            if not got:
                return
            acked = await b.queues.ack(t, [(r.body.id, r.token) for r in got])
            done += sum(acked)

    async with Meter(b) as m:
        await asyncio.gather(*(drain() for _ in range(loops)))
    label = f"reserve+ack, k={k}" + (f", {loops} loops:" if loops > 1 else ":")
    print(m.line(label, done))
    await b.purge_type(t)


async def bench_pool(b: RedisBackend, size: int, samples: int) -> None:
    name = f"bench-pool-{size}"
    sites = [f"site{i}.example" for i in range(10)]
    sem = asyncio.Semaphore(64)

    async def put(i: int) -> None:
        async with sem:
            await b.pools.put(name, {"cookie": i}, {"site": sites[i % 10]}, ttl_seconds=3600 + i)

    for start in range(0, size, 5000):
        await asyncio.gather(*(put(i) for i in range(start, min(size, start + 5000))))
    for label, where in (("any", None), ("where site", {"site": sites[3]})):
        lat: list[float] = []
        for _ in range(samples):
            t0 = time.perf_counter()
            claim = await b.pools.claim(name, where=where, hold_seconds=30)
            lat.append(time.perf_counter() - t0)
            assert claim is not None
            await b.pools.release(name, claim.item.id, claim.token)
        print(
            f"pool claim at {size:>7,} items ({label:10}): "
            f"p50 {pct(lat, 0.5) * 1e6:6.0f} us   p99 {pct(lat, 0.99) * 1e6:6.0f} us"
        )
    await b.pools.drop(name)


async def commands_processed(b: RedisBackend) -> tuple[int, int]:
    """(client round trips: script calls + BLPOPs, every command incl. inside scripts)."""
    stats = await b._r.info("commandstats")
    trips = sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "blpop"))
    info = await b._r.info("stats")
    return trips, int(info["total_commands_processed"])


async def bench_idle(b: RedisBackend, slots: int, seconds: float, timeout: float) -> None:
    stop = asyncio.Event()

    async def slot() -> None:
        while not stop.is_set():
            await b.queues.reserve("bench-idle", k=1, timeout=timeout)

    tasks = [asyncio.create_task(slot()) for _ in range(slots)]
    await asyncio.sleep(0.5)  # let every slot block
    before = await commands_processed(b)
    await asyncio.sleep(seconds)
    after = await commands_processed(b)
    stop.set()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    trips = (after[0] - before[0]) / seconds
    total = (after[1] - before[1] - 2) / seconds  # minus the two INFO calls
    print(
        f"idle: {slots} blocked reserve loops (timeout {timeout:g}s) over {seconds:g}s: "
        f"{trips:.2f} round trips/s, {total:.2f} commands/s incl. those inside scripts"
    )


async def bench_idle_feeder(b: RedisBackend, seconds: float, timeout: float) -> None:
    """What an idle 10-slot worker does: one feeder reserving k=10 with a timeout."""
    stop = asyncio.Event()

    async def feeder() -> None:
        while not stop.is_set():
            await b.queues.reserve("bench-idle", k=10, timeout=timeout)

    task = asyncio.create_task(feeder())
    await asyncio.sleep(0.5)
    before = await commands_processed(b)
    await asyncio.sleep(seconds)
    after = await commands_processed(b)
    stop.set()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    trips = (after[0] - before[0]) / seconds
    total = (after[1] - before[1] - 2) / seconds
    print(
        f"idle worker (one feeder, reserve k=10, timeout {timeout:g}s) over {seconds:g}s: "
        f"{trips:.2f} round trips/s, {total:.2f} commands/s incl. those inside scripts"
    )


async def main(url: str, quick: bool, smoke: bool = False) -> None:
    b = RedisBackend(url)
    await b.connect()
    try:
        scale = 100 if smoke else 5 if quick else 1
        await bench_push(b, 5000 // scale, 100_000 // scale)
        await bench_drain(b, 5000 // scale, 1)
        await bench_drain(b, 100_000 // scale, 50)
        await bench_drain(b, 100_000 // scale, 200)
        await bench_drain(b, 100_000 // scale, 100, loops=2)
        await bench_pool(b, 1000 // (scale if smoke else 1), 2000 // scale)
        await bench_pool(b, 100_000 // scale, 2000 // scale)
        await bench_idle(b, 10, 10.0 / scale, 5.0)
        await bench_idle_feeder(b, 10.0 / scale, 5.0)
    finally:
        await b.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="use this Redis instead of starting one (it is written to)")
    parser.add_argument("--quick", action="store_true", help="smaller runs")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.url:
        asyncio.run(main(args.url, args.quick, args.smoke))
    else:
        with redis_server() as server_url:
            asyncio.run(main(server_url, args.quick, args.smoke))
