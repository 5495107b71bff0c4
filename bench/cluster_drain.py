"""Drain on a Redis Cluster against one Redis server (issue 29). A script, not a test.

Starts one ``redis-server`` and a cluster of three primaries (``--cluster-enabled yes``,
``redis-cli --cluster create``) on this machine. For each, pushes ``--tasks`` no-op
tasks of ``--types`` automation types (the types spread over the cluster's slots),
then starts one worker process per type and times the
drain until every task ran (each task INCRs a counter on the single server, as the
peers' jobs do). Reports tasks/s per target, best of ``--rounds``.

    .venv/bin/python bench/cluster_drain.py [--tasks 20000] [--types 3] [--slots 50]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import SMOKE_HELP, loadavg, redis_server, spawn, stop, worker_cmd

from tests.support.redis_cluster import ClusterSet

TYPE = "noop"


async def fill(url: str, types: list[str], per_type: int, slots: int) -> None:
    from fleet.backends import open_backend
    from fleet.core.submission import make_push_request

    b = await open_backend(url)
    try:
        for t in types:
            await b.configs.set(t, {"slots": slots})
            for start in range(0, per_type, 1000):
                n = min(1000, per_type - start)
                await b.queues.push(t, [make_push_request({"i": start + i}) for i in range(n)])
    finally:
        await b.close()


def drain(url: str, counter_url: str, types: list[str], per_type: int, slots: int) -> float:
    """Tasks per second of one worker process per type over ``url``."""
    counter = redis.Redis.from_url(counter_url)
    counter.delete("peerbench:done")
    asyncio.run(fill(url, types, per_type, slots))
    total = per_type * len(types)
    # One worker process per type (bench/noop_plugin.py registers the extra types).
    procs = []
    t0 = time.perf_counter()
    for i, t in enumerate(types):
        cmd = worker_cmd(url, "noop_plugin", t, f"bench-{i}")
        procs.append(spawn(cmd, env={"REDIS_URL": counter_url, "NOOP_TYPES": ",".join(types[1:])}))
    try:
        deadline = t0 + 600
        while int(counter.get("peerbench:done") or 0) < total:
            if time.perf_counter() > deadline:
                raise RuntimeError("the drain did not finish in 10 minutes")
            time.sleep(0.02)
        return total / (time.perf_counter() - t0)
    finally:
        for proc in procs:
            stop(proc)
        counter.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--types", type=int, default=3)
    parser.add_argument("--slots", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.tasks, args.types, args.rounds = 300, 2, 1
    types = [TYPE if i == 0 else f"{TYPE}{i}" for i in range(args.types)]
    per_type = args.tasks // len(types)
    print(f"load average at start: {loadavg()}")
    cluster = ClusterSet()
    cluster.start()
    try:
        with redis_server() as single:
            rows = []
            for name, url in (("one server", single), ("cluster, 3 primaries", cluster.url)):
                rates = []
                for _ in range(args.rounds):
                    redis.Redis.from_url(single).flushall()
                    cluster.flush()
                    rates.append(drain(url, single, types, per_type, args.slots))
                rows.append((name, max(rates)))
            print(
                f"drain of {per_type * len(types):,} no-op tasks, {len(types)} types, one worker "
                f"process per type at {args.slots} slots, best of {args.rounds}:"
            )
            print("| backend | tasks/s |\n|---|---|")
            for name, rate in rows:
                print(f"| {name} | {rate:,.0f} |")
    finally:
        cluster.cleanup()
    print(f"load average at end: {loadavg()}")


if __name__ == "__main__":
    main()
