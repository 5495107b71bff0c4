"""Latency from submit to ``run_one`` start at low load (a script, not a test).

Starts a private redis-server (or uses ``--url``) and one ``fleet worker``
(10 slots) idle on the ``latency`` type, then submits ``--tasks`` tasks one at a
time through ``TaskQueues.push_one`` (the path of ``ctx.submit`` and the client),
``--interval`` seconds apart, so the worker is idle and blocked in its reserve
when each task arrives. Each payload carries ``time.time()`` at submit;
``run_one`` records its own start time (bench/latency_plugin.py). Prints p50,
p90, p99 and max. Usage::

    .venv/bin/python bench/latency.py [--tasks 1000] [--interval 0.01]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import SMOKE_HELP, loadavg, pct, redis_server, spawn, stop, worker_cmd

from fleet.backends import open_backend
from fleet.core.submission import make_push_request

TYPE = "latency"
LAT_KEY = "bench:latency"


async def main(args: argparse.Namespace) -> None:
    with redis_server(args.url) as url:
        backend = await open_backend(url)
        await backend.purge_type(TYPE)
        await backend.configs.set(TYPE, {"slots": args.slots})
        r = backend._r  # type: ignore[attr-defined]  # the bench reads its own list
        await r.delete(LAT_KEY)
        worker = spawn(worker_cmd(url, "latency_plugin", TYPE), env={"REDIS_URL": url})
        try:
            # warm up: wait until the worker runs a task (imports, connections)
            await backend.queues.push_one(TYPE, make_push_request({"submitted": time.time()}))
            deadline = time.monotonic() + 60
            while await r.llen(LAT_KEY) < 1:
                if time.monotonic() > deadline:
                    raise RuntimeError("the worker ran no task within 60 s")
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)  # let the worker settle into its blocking reserve
            await r.delete(LAT_KEY)
            print(f"load average at start: {loadavg()}")
            for _ in range(args.tasks):
                await backend.queues.push_one(TYPE, make_push_request({"submitted": time.time()}))
                await asyncio.sleep(args.interval)
            deadline = time.monotonic() + 30
            while await r.llen(LAT_KEY) < args.tasks and time.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
            values = [float(x) * 1000 for x in await r.lrange(LAT_KEY, 0, -1)]
        finally:
            stop(worker)
            await backend.purge_type(TYPE)
            await backend.close()
        print(
            f"submit -> run_one start over {len(values)} tasks ({args.interval * 1000:g} ms apart, "
            f"{args.slots} slots): p50 {pct(values, 50):.2f} ms, p90 {pct(values, 90):.2f} ms, "
            f"p99 {pct(values, 99):.2f} ms, max {max(values):.2f} ms"
        )
        print(f"load average at end: {loadavg()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=None, help="use this Redis instead of a private one")
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=0.01, help="seconds between submits")
    parser.add_argument("--slots", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.tasks = 20
    asyncio.run(main(args))
