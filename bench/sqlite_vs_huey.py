"""Fleet on SQLite against Huey's SqliteHuey, at the same durability, in one run
(a script, not a test).

Both use one SQLite file in WAL mode with ``synchronous=NORMAL`` (Fleet's setting;
Huey is given it through its storage, ``bench/huey_app.py``; ``--huey-sync full``
adds rows at Huey's default, SQLite's FULL). What each promises differs and is in
the row: Huey deletes a task when a consumer takes it (a consumer killed mid-task
loses it), Fleet leases it (a killed worker's task is delivered again) and keeps
every finished task's record (``FLEET_RESULT_TTL_SECONDS``); Huey keeps no result
for a task that returns None.

For each row, rounds interleaved: a fresh file, N no-op tasks enqueued one by one
through the producer call each user makes (Fleet: ``TaskQueues.push_one``, what
``ctx.submit`` calls; Huey: calling the task), then the worker process(es) started
together and the drain timed from spawn to the last task (start-up included) and
from the first task done to the last. Several Fleet processes run two ways: one
``fleet worker --processes N`` (imports once, then forks, as Huey's ``-k process``
does) and N ``fleet worker`` commands. Huey comes with the test extras
(``pip install -e '.[test]'``): it needs nothing but the standard library.

    .venv/bin/python bench/sqlite_vs_huey.py [--tasks 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import HERE, SMOKE_HELP, loadavg, poll_drain, spawn, stop, worker_cmd

from fleet.backends import open_backend
from fleet.core.submission import make_push_request

TYPE = "bench-noop"
#: A drain that takes longer than this failed (seconds).
TIMEOUT = 300.0


@dataclass
class Row:
    label: str
    enqueue: list[float] = field(default_factory=list)  # tasks/s one by one
    spawn_rate: list[float] = field(default_factory=list)  # spawn -> last
    steady: list[float] = field(default_factory=list)  # first done -> last
    cpu_ms: list[float] = field(default_factory=list)  # worker CPU per task


async def fleet_round(row: Row, tasks: int, procs: int, slots: int, fork: bool = False) -> None:
    with tempfile.TemporaryDirectory(prefix="fleet-vs-huey-") as tmp:
        url = f"sqlite:///{tmp}/fleet.db"
        backend = await open_backend(url)
        try:
            await backend.configs.set(TYPE, {"slots": slots})
            t0 = time.perf_counter()
            for i in range(tasks):
                await backend.queues.push_one(TYPE, make_push_request({"i": i}))
            row.enqueue.append(tasks / (time.perf_counter() - t0))
            t0 = time.perf_counter()
            if fork:  # one command forks the processes after its imports
                cmd = [*worker_cmd(url, "worker_noop", TYPE, "bench"), "--processes", str(procs)]
                workers = [spawn(cmd)]
            else:
                workers = [
                    spawn(worker_cmd(url, "worker_noop", TYPE, f"bench-{i}")) for i in range(procs)
                ]
            try:

                async def done() -> int:
                    return (await backend.queues.depths(TYPE)).counters.completed

                got = await poll_drain(workers, done, tasks, t0, TIMEOUT)
            finally:
                for w in workers:
                    stop(w)
        finally:
            await backend.close()
    row.spawn_rate.append(got.spawn_rate)
    row.steady.append(got.steady)
    row.cpu_ms.append(got.cpu_ms)


async def huey_round(row: Row, tasks: int, consumer_args: list[str], sync: str) -> None:
    with tempfile.TemporaryDirectory(prefix="huey-vs-fleet-") as tmp:
        db = f"{tmp}/huey.db"
        env = {**os.environ, "HUEY_FILE": db, "HUEY_SYNC": sync, "PYTHONPATH": str(HERE)}
        out = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-c", f"import huey_app; huey_app.enqueue({tasks})"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        row.enqueue.append(tasks / json.loads(out.stdout)["seconds"])
        conn = sqlite3.connect(db, timeout=30)
        t0 = time.perf_counter()
        consumer = spawn(
            [sys.executable, "-m", "huey.bin.huey_consumer", "huey_app.huey", "-q", *consumer_args],
            env={"HUEY_FILE": db, "HUEY_SYNC": sync},
        )
        try:

            async def done() -> int:
                left = conn.execute("select count(*) from task where queue = 'bench'").fetchone()
                return tasks - int(left[0])

            got = await poll_drain([consumer], done, tasks, t0, TIMEOUT)
        finally:
            stop(consumer)
            conn.close()
    row.spawn_rate.append(got.spawn_rate)
    row.steady.append(got.steady)
    row.cpu_ms.append(got.cpu_ms)


async def main(args: argparse.Namespace) -> None:
    from huey import __version__ as huey_version

    print(f"huey {huey_version}; load average at start: {loadavg()}")
    rows: list[tuple[Row, Callable[[Row], Awaitable[None]]]] = []
    for procs in args.procs:
        label = f"fleet sqlite, {procs} process(es) x slots={args.slots}, WAL + NORMAL, leases"
        if procs > 1:
            label = (
                f"fleet sqlite, {procs} worker commands x slots={args.slots}, WAL + NORMAL, leases"
            )
            forked = (
                f"fleet sqlite, one command --processes {procs} x slots={args.slots}, "
                "WAL + NORMAL, leases"
            )
            rows.append(
                (
                    Row(forked),
                    lambda r, p=procs: fleet_round(r, args.tasks, p, args.slots, fork=True),
                )
            )
        rows.append((Row(label), lambda r, p=procs: fleet_round(r, args.tasks, p, args.slots)))
        for sync in args.huey_sync:
            if procs == 1:
                cargs = ["-w", str(args.slots), "-k", "thread"]
                what = f"1 process x {args.slots} threads"
            else:
                cargs = ["-w", str(procs), "-k", "process"]
                what = f"{procs} processes (-k process)"
            label = f"huey SqliteHuey, {what}, WAL + {sync.upper()}"
            rows.append((Row(label), lambda r, c=cargs, s=sync: huey_round(r, args.tasks, c, s)))
    for rnd in range(args.rounds):
        for row, run in rows:
            await run(row)
            print(
                f"round {rnd + 1}: {row.label}: enqueue {row.enqueue[-1]:,.0f}/s, drain "
                f"{row.spawn_rate[-1]:,.0f}/s (steady {row.steady[-1]:,.0f}/s), "
                f"worker CPU {row.cpu_ms[-1]:.3f} ms/task",
                flush=True,
            )
    print(f"load average at end: {loadavg()}")
    print(f"\nmedians of {args.rounds} round(s), {args.tasks:,} no-op tasks:\n")
    print(
        "| row | enqueue 1-by-1/s | drain tasks/s (spawn->last) | steady tasks/s "
        "| worker CPU ms/task |"
    )
    print("|---|---|---|---|---|")
    med = statistics.median
    for row, _ in rows:
        print(
            f"| {row.label} | {med(row.enqueue):,.0f} | {med(row.spawn_rate):,.0f} | "
            f"{med(row.steady):,.0f} | {med(row.cpu_ms):.3f} |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--procs", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--slots", type=int, default=10)
    parser.add_argument("--huey-sync", nargs="+", default=["normal"], choices=["normal", "full"])
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.tasks, args.rounds, args.procs = 200, 1, [1, 2]
        TIMEOUT = 30.0
    asyncio.run(main(args))
