"""Redis memory per queued task, and the Redis commands/s of an idle worker
(a script, not a test).

* memory: ``INFO memory`` used_memory before and after pushing ``--tasks``
  no-op tasks (``{"i": n}`` payloads) through ``TaskQueues.push``, divided by the
  number of tasks;
* idle: one ``fleet worker`` with ``--slots`` slots and nothing to do; after it
  settled, the change of ``total_commands_processed`` over ``--seconds`` (our
  own two INFO calls subtracted), i.e. everything the worker sends: reserve,
  blocking waits, heartbeats, config and control watches.

    .venv/bin/python bench/redis_footprint.py [--tasks 100000] [--seconds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import SMOKE_HELP, loadavg, redis_server, spawn, stop, worker_cmd

from fleet.backends import open_backend
from fleet.core.submission import make_push_request


async def memory_per_task(backend: Any, r: Any, tasks: int) -> None:
    await backend.purge_type("mem")
    before = int((await r.info("memory"))["used_memory"])
    for start in range(0, tasks, 5000):
        chunk = [make_push_request({"i": i}) for i in range(start, min(tasks, start + 5000))]
        await backend.queues.push("mem", chunk)
    after = int((await r.info("memory"))["used_memory"])
    depth = await backend.queues.depths("mem")
    print(
        f"memory: {tasks:,} queued tasks (depth {depth.normal:,}) use "
        f"{(after - before) / 2**20:.1f} MiB: "
        f"{(after - before) / tasks:.0f} bytes per queued task"
    )
    await backend.purge_type("mem")


async def idle_worker(
    backend: Any, r: Any, url: str, slots: int, seconds: float, settle: float
) -> None:
    await backend.purge_type("noop")
    await backend.configs.set("noop", {"slots": slots})
    worker = spawn(worker_cmd(url, "noop_plugin", "noop", "idle"), env={"REDIS_URL": url})
    try:
        await asyncio.sleep(settle)  # start-up: registration, first config read, first reserve
        c0 = int((await r.info("stats"))["total_commands_processed"])
        t0 = time.monotonic()
        await asyncio.sleep(seconds)
        c1 = int((await r.info("stats"))["total_commands_processed"])
        elapsed = time.monotonic() - t0
        if worker.poll() is not None:
            raise RuntimeError("the worker exited")
        cmds = c1 - c0 - 1  # the first INFO is counted in c1
        print(
            f"idle worker ({slots} slots, nothing queued) over {elapsed:.0f} s: "
            f"{cmds} Redis commands = {cmds / elapsed:.2f} commands/s"
        )
    finally:
        stop(worker)


async def main(args: argparse.Namespace) -> None:
    print(f"load average at start: {loadavg()}")
    with redis_server(args.url) as url:
        backend = await open_backend(url)
        r = backend._r  # type: ignore[attr-defined]  # INFO on the backend's own client
        try:
            await memory_per_task(backend, r, args.tasks)
            await idle_worker(backend, r, url, args.slots, args.seconds, args.settle)
        finally:
            await backend.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=None, help="use this Redis instead of a private one")
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--slots", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--settle", type=float, default=5.0, help="seconds of worker start-up")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.tasks, args.seconds, args.settle = 1000, 1.0, 2.0
    asyncio.run(main(args))
