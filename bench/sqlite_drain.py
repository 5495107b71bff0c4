"""Drain throughput and idle cost of the SQLite backend (a script, not a test).

    .venv/bin/python bench/sqlite_drain.py [--tasks 20000] [--batch 100] [--procs 4]

Measures, on a fresh file in a temporary directory:

* push: no-op tasks enqueued per second (pushes of 1,000);
* drain, 1 process: tasks/s reserved and acked in batches of ``--batch``;
* drain, 1 process, 10 slots: ten coroutines each reserving one task at a time
  (how a worker's slots use the queue);
* drain, N processes: ``--procs`` processes on one file, timed from a common
  start signal after every process has opened the file;
* idle: watcher polls per second, and CPU use, of one backend with 10 blocked
  reserves (each poll is one ``PRAGMA data_version`` while nothing changes).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import sys
import tempfile
import time
from multiprocessing.synchronize import Barrier
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.backends.sqlite import SQLiteBackend
from fleet.core.records import PushRequest, TaskBody, new_id

TYPE = "bench"


async def push(backend: Backend, n: int) -> float:
    """Push ``n`` no-op tasks; returns tasks/s."""
    started = time.perf_counter()
    for start in range(0, n, 1000):
        reqs = [PushRequest(TaskBody(id=new_id(), payload={})) for _ in range(min(1000, n - start))]
        await backend.queues.push(TYPE, reqs)
    return n / (time.perf_counter() - started)


async def drain_batches(backend: Backend, batch: int) -> int:
    """Reserve and ack until the queue is empty; how many tasks."""
    done = 0
    while True:
        got = await backend.queues.reserve(TYPE, k=batch)
        if not got:
            return done
        await backend.queues.ack(TYPE, [(r.body.id, r.token) for r in got])
        done += len(got)


async def drain_slots(backend: Backend, slots: int) -> int:
    async def slot() -> int:
        done = 0
        while got := await backend.queues.reserve(TYPE, k=1):
            await backend.queues.ack(TYPE, [(got[0].body.id, got[0].token)])
            done += 1
        return done

    return sum(await asyncio.gather(*(slot() for _ in range(slots))))


def _child(url: str, batch: int, barrier: Barrier, counts: mp.Queue[int]) -> None:
    async def run() -> None:
        backend = await open_backend(url)
        try:
            barrier.wait()
            counts.put(await drain_batches(backend, batch))
        finally:
            await backend.close()

    asyncio.run(run())


def drain_processes(url: str, procs: int, batch: int) -> tuple[float, int]:
    """Drain with ``procs`` processes; (seconds from the start signal, tasks done)."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(procs + 1)
    counts: mp.Queue[int] = ctx.Queue()
    children = [
        ctx.Process(target=_child, args=(url, batch, barrier, counts)) for _ in range(procs)
    ]
    for child in children:
        child.start()
    barrier.wait()
    started = time.perf_counter()
    total = sum(counts.get(timeout=300) for _ in children)
    elapsed = time.perf_counter() - started
    for child in children:
        child.join()
    return elapsed, total


async def idle_polls(url: str, seconds: float) -> tuple[float, float]:
    """Polls/s and CPU % of this process with 10 reserves blocked for ``seconds``."""
    backend = await open_backend(url)
    assert isinstance(backend, SQLiteBackend)
    try:
        waiting = [
            asyncio.create_task(backend.queues.reserve("idle", timeout=seconds + 5))
            for _ in range(10)
        ]
        await asyncio.sleep(0.5)
        before, started, cpu = backend.watcher_polls, time.perf_counter(), time.process_time()
        await asyncio.sleep(seconds)
        elapsed = time.perf_counter() - started
        rate = (backend.watcher_polls - before) / elapsed
        cpu_percent = 100 * (time.process_time() - cpu) / elapsed
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        return rate, cpu_percent
    finally:
        await backend.close()


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        backend = await open_backend(url)
        try:
            rate = await push(backend, args.tasks)
            print(f"push                         {rate:10,.0f} tasks/s")
            started = time.perf_counter()
            done = await drain_batches(backend, args.batch)
            elapsed = time.perf_counter() - started
            print(f"drain 1 process, k={args.batch:<4}      {done / elapsed:10,.0f} tasks/s")
            await push(backend, args.tasks // 4)
            started = time.perf_counter()
            done = await drain_slots(backend, 10)
            elapsed = time.perf_counter() - started
            print(f"drain 1 process, 10 slots k=1 {done / elapsed:9,.0f} tasks/s")
            await push(backend, args.tasks)
        finally:
            await backend.close()
        elapsed, done = drain_processes(url, args.procs, args.batch)
        assert done == args.tasks, (done, args.tasks)
        print(f"drain {args.procs} processes, k={args.batch:<4}    {done / elapsed:10,.0f} tasks/s")
        polls, cpu = await idle_polls(url, args.idle_seconds)
        print(f"idle, 10 blocked reserves    {polls:10.1f} polls/s ({cpu:.1f}% of one CPU)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--idle-seconds", type=float, default=3.0)
    parser.add_argument(
        "--smoke", action="store_true", help="a smoke run on a tiny input (tests/bench)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.tasks, args.procs, args.idle_seconds = 400, 2, 0.5
    asyncio.run(main(args))
