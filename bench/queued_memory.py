"""Redis memory per queued task: Fleet against the peers, on one private redis-server
(a script, not a test).

For each system, on a flushed server: ``INFO memory`` ``used_memory`` before and after N
no-op tasks enqueued one by one through the peer harness' own producer code (each peer in
its own venv, from ``$PEERS_DIR``, default ``/tmp/fleet-peers``, set up by
``bench/run_peers.sh``; Fleet through ``ctx.submit``); bytes per task = the difference / N.
A system whose venv is missing is left out, and the script says so.

    .venv/bin/python bench/queued_memory.py [--tasks 20000] [--only fleet,taskiq-stream]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
from pathlib import Path

import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import SMOKE_HELP, loadavg, redis_server
from noop_plugin import Noop

from fleet.backends import open_backend
from fleet.core import BaseConfig, Context, Queue

PEERS = Path(os.environ.get("PEERS_DIR", "/tmp/fleet-peers"))

#: label -> (venv folder under the peers' folder, harness module, extra env, async?)
PEER_PRODUCERS: dict[str, tuple[str, str, dict[str, str], bool]] = {
    "taskiq-stream": (".venv-taskiq", "taskiq_bench", {"VARIANT": "stream"}, True),
    "dramatiq": (".venv", "dramatiq_bench", {}, False),
    "saq": (".venv", "saq_bench", {}, True),
    "arq": (".venv", "arq_bench", {"VARIANT": "tuned"}, True),
}


def _peer_code(module: str, n: int, is_async: bool) -> str:
    if is_async:
        return (
            f"import asyncio, {module} as m\n"
            "async def main():\n"
            "    if hasattr(m, 'setup'):\n"
            "        await m.setup()\n"
            f"    for i in range({n}):\n"
            "        await m.enqueue_one(i)\n"
            "asyncio.run(main())\n"
        )
    return f"import {module} as m\nfor i in range({n}):\n    m.enqueue_one(i)\n"


async def fleet_enqueue(url: str, n: int) -> None:
    backend = await open_backend(url)
    try:
        config = BaseConfig()
        ctx = Context(backend=backend, automation_type="producer", config=lambda: config)
        queue = Queue("noop", payload=Noop)
        for i in range(n):
            await ctx.submit(queue, Noop(i=i))
    finally:
        await backend.close()


async def measure(url: str, label: str, n: int) -> float | None:
    r = aioredis.Redis.from_url(url)
    try:
        await r.flushall()
        before = int((await r.info("memory"))["used_memory"])
        if label == "fleet":
            await fleet_enqueue(url, n)
        elif label == "bullmq":
            folder = PEERS / "bullmq"
            if not (folder / "node_modules").is_dir():
                print(f"no BullMQ at {folder}: its row is left out")
                return None
            await asyncio.to_thread(
                subprocess.run,
                ["node", "producer.js", "one", str(n)],
                cwd=folder,
                env={**os.environ, "REDIS_URL": url},
                check=True,
                capture_output=True,
            )
        else:
            venv, module, env, is_async = PEER_PRODUCERS[label]
            python = PEERS / venv / "bin" / "python"
            if not python.exists():
                print(f"no {python}: the {label} row is left out")
                return None
            await asyncio.to_thread(
                subprocess.run,
                [str(python), "-c", _peer_code(module, n, is_async)],
                cwd=PEERS,
                env={**os.environ, "REDIS_URL": url, **env},
                check=True,
                capture_output=True,
            )
        after = int((await r.info("memory"))["used_memory"])
        keys = int(await r.dbsize())
    finally:
        await r.aclose()
    per_task = (after - before) / n
    print(f"{label}: {per_task:,.0f} bytes per queued task ({keys:,} keys)", flush=True)
    return per_task


async def main(args: argparse.Namespace) -> None:
    print(f"load average at start: {loadavg()}")
    rows: dict[str, float] = {}
    with redis_server(args.url) as url:
        systems = ["fleet", "bullmq", *PEER_PRODUCERS]
        if args.only:
            systems = [s for s in systems if s in args.only.split(",")]
        for label in systems:
            got = await measure(url, label, args.tasks)
            if got is not None:
                rows[label] = got
    print(f"\n| system | bytes per queued task ({args.tasks:,} tasks, one by one) |")
    print("|---|---|")
    for label, per_task in sorted(rows.items(), key=lambda kv: kv[1]):
        print(f"| {label} | {per_task:,.0f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--url", help="a Redis to use (flushed!) instead of a private one")
    parser.add_argument(
        "--only", help="comma-separated systems to measure (default: fleet, bullmq and the peers)"
    )
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.tasks = 200
    asyncio.run(main(args))
