"""SQLite backend: drain of no-op tasks by one and by several ``fleet worker``
processes sharing one database file (a script, not a test).

For each process count: a fresh file, ``--tasks`` no-op tasks pushed first
(type ``bench-noop`` of bench/worker_noop.py, whose ``run_one`` returns at once),
then the worker processes are started together. Reports tasks/s from the first
completed task to the last (start-up excluded) and from spawn to the last
(start-up included), plus the workers' CPU per task. Completion is read from the
queue's ``completed`` counter every 20 ms.

    .venv/bin/python bench/sqlite_workers.py [--tasks 20000] [--procs 1 4] [--slots 10]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import SMOKE_HELP, loadavg, poll_drain, spawn, stop, worker_cmd

from fleet.backends import open_backend
from fleet.core.submission import make_push_request

TYPE = "bench-noop"


async def drain(tasks: int, procs: int, slots: int) -> None:
    with tempfile.TemporaryDirectory(prefix="fleet-sqlite-bench-") as tmp:
        url = f"sqlite:///{tmp}/fleet.db"
        backend = await open_backend(url)
        await backend.configs.set(TYPE, {"slots": slots})
        for start in range(0, tasks, 1000):
            chunk = [make_push_request({"i": i}) for i in range(start, min(tasks, start + 1000))]
            await backend.queues.push(TYPE, chunk)
        t0 = time.perf_counter()
        workers = [spawn(worker_cmd(url, "worker_noop", TYPE, f"bench-{i}")) for i in range(procs)]
        try:

            async def done() -> int:
                return (await backend.queues.depths(TYPE)).counters.completed

            got = await poll_drain(workers, done, tasks, t0)
        finally:
            for w in workers:
                stop(w)
            await backend.close()
        print(
            f"sqlite, {procs} worker process(es) x {slots} slots, {tasks:,} tasks: "
            f"{got.steady:,.0f} tasks/s first->last, {got.spawn_rate:,.0f} tasks/s spawn->last, "
            f"worker CPU {got.cpu_ms:.2f} ms/task (start-up included)"
        )


async def main(args: argparse.Namespace) -> None:
    print(f"load average at start: {loadavg()}")
    for procs in args.procs:
        await drain(args.tasks, procs, args.slots)
    print(f"load average at end: {loadavg()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--procs", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--slots", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.tasks, args.procs = 200, [1, 2]
    asyncio.run(main(args))
