"""Flow control's cost: reserve latency against the number of groups, and the drain of
one worker process with no groups, 100 groups and 10,000 groups.

Usage (from the repository root)::

    .venv/bin/python bench/groups.py                       # both parts, Redis + SQLite + memory
    .venv/bin/python bench/groups.py --part reserve --backends redis
    .venv/bin/python bench/groups.py --part drain --tasks 20000 --rounds 3

``reserve``: for G in 0 (no group), 1, 100, 1,000 and 10,000 groups, push the same
number of tasks spread round robin over the groups, then time ``reserve(k=1)`` calls
(each through the backend's public API, one at a time) and report p50/p99 in µs; then
the same with every group capped at ``group_concurrency=1`` and all but a handful
saturated (the set-aside groups must cost nothing).

``drain``: one ``fleet worker`` process (10 slots) drains N no-op tasks (one ``INCR``
each, ``bench/noop_plugin.py``) on a private redis-server, with no group, 100 groups
and 10,000 groups, rounds interleaved; reported as tasks/s from spawn and the ratio
against the no-group row of the same round.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import redis
from benchlib import HERE, PYTHON, SMOKE_HELP, loadavg, pct, redis_server

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core.flow import GroupLimits
from fleet.core.records import PushRequest, TaskBody, new_id, now

ROOT = HERE.parent
TYPE = "bench-groups"
GROUP_COUNTS = (0, 1, 100, 1000, 10_000)


def grouped(n: int, groups: int) -> list[PushRequest]:
    t = now()
    return [
        PushRequest(
            TaskBody(
                id=new_id(),
                payload={"i": i},
                enqueued_at=t,
                group=None if groups == 0 else f"g{i % groups}",
            )
        )
        for i in range(n)
    ]


async def fill(b: Backend, n: int, groups: int) -> None:
    reqs = grouped(n, groups)
    for start in range(0, n, 1000):
        await b.queues.push(TYPE, reqs[start : start + 1000])


async def time_reserves(b: Backend, calls: int) -> list[float]:
    out: list[float] = []
    for _ in range(calls):
        t0 = time.perf_counter()
        got = await b.queues.reserve(TYPE, k=1)
        out.append((time.perf_counter() - t0) * 1e6)
        assert got, "the queue ran dry: push more tasks"
    return out


async def reserve_part(
    backends: list[str], tasks: int, calls: int, counts: tuple[int, ...], redis_url: str | None
) -> None:
    print(f"\nreserve(k=1) latency, µs (p50 / p99 of {calls} calls); {tasks:,} tasks pushed")
    print(
        "| backend | groups | no limits p50 | p99 | capped at 1, all but one saturated p50 | p99 |"
    )
    print("|---|---|---|---|---|---|")
    with redis_server(redis_url) as rurl, tempfile.TemporaryDirectory() as tmp:
        for kind in backends:
            for g in counts:
                row: list[str] = []
                for capped in (False, True):
                    if capped and g == 0:
                        row += ["n/a", "n/a"]
                        continue
                    url = {
                        "redis": rurl,
                        "sqlite": f"sqlite:///{tmp}/b-{g}-{capped}.db",
                        "memory": f"memory://bench-{g}-{capped}",
                    }[kind]
                    async with await open_backend(url) as b:
                        await b.purge_type(TYPE)
                        if capped:
                            await fill(b, max(tasks, 3 * g), g)
                            lat = await time_saturated(b, g, calls)
                        else:
                            await fill(b, tasks, g)
                            lat = await time_reserves(b, calls)
                    row += [f"{pct(lat, 50):,.0f}", f"{pct(lat, 99):,.0f}"]
                print(f"| {kind} | {g:,} | " + " | ".join(row) + " |", flush=True)


async def time_saturated(b: Backend, groups: int, calls: int) -> list[float]:
    """Every group capped at one running task and holding one: each round acks one
    reservation (its group gets budget back) and times one reserve, which must find
    that group while every other one is set aside."""
    await b.groups.set_defaults(TYPE, GroupLimits(concurrency=1), gen=1)
    held: list[Any] = []
    while len(held) < groups:
        got = await b.queues.reserve(TYPE, k=1000)
        if not got:
            break
        held += got
    out: list[float] = []
    for i in range(calls):
        victim = held[i % len(held)]
        await b.queues.ack(TYPE, [(victim.body.id, victim.token)])
        t0 = time.perf_counter()
        got = await b.queues.reserve(TYPE, k=1)
        out.append((time.perf_counter() - t0) * 1e6)
        assert len(got) == 1, "the freed group was not found"
        held[i % len(held)] = got[0]
    return out


PRODUCER = r"""
import asyncio, sys
from fleet.backends import open_backend
from fleet.core.records import PushRequest, TaskBody, new_id, now

async def main(url, n, groups):
    b = await open_backend(url)
    await b.configs.set("noop", {"slots": 10})
    t = now()
    reqs = [PushRequest(TaskBody(id=new_id(), payload={"i": i}, enqueued_at=t,
            group=None if groups == 0 else f"g{i % groups}")) for i in range(n)]
    for s in range(0, n, 1000):
        await b.queues.push("noop", reqs[s:s + 1000])
    await b.close()

asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
"""


def drain_round(url: str, n: int, groups: int) -> float:
    client = redis.Redis.from_url(url)
    client.flushdb()
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{HERE}", "REDIS_URL": url}
    subprocess.run([PYTHON, "-c", PRODUCER, url, str(n), str(groups)], env=env, check=True)
    cmd = [PYTHON, "-m", "fleet", "--log-level", "WARNING", "worker", "--plugin", "noop_plugin"]
    cmd += ["--type", "noop", "--id", "bench", "--backend", url]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT)
    deadline = t0 + 600
    done = 0
    while done < n and time.perf_counter() < deadline:
        done = int(client.get("peerbench:done") or 0)
        time.sleep(0.005)
    wall = time.perf_counter() - t0
    proc.terminate()
    proc.wait(30)
    client.close()
    if done < n:
        raise SystemExit(f"only {done} of {n} tasks ran with {groups} groups")
    return n / wall


def drain_part(tasks: int, rounds: int, counts: tuple[int, ...], redis_url: str | None) -> None:
    rows: dict[int, list[float]] = {g: [] for g in counts}
    with redis_server(redis_url) as url:
        for rnd in range(rounds):
            for g in rows:
                rate = drain_round(url, tasks, g)
                rows[g].append(rate)
                print(f"round {rnd + 1}, {g:,} groups: {rate:,.0f} tasks/s", flush=True)
    base = statistics.median(rows[0])
    print(f"\ndrain of {tasks:,} no-op tasks by one worker (slots=10), Redis, median of {rounds}")
    print("| groups | drain tasks/s | vs no groups |")
    print("|---|---|---|")
    for g, rates in rows.items():
        med = statistics.median(rates)
        print(f"| {g:,} | {med:,.0f} | {med / base:.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["reserve", "drain", "both"], default="both")
    parser.add_argument("--backends", default="redis,sqlite,memory")
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--calls", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--url", default=None, help="use this Redis (it is flushed!)")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    reserve_counts, drain_counts = GROUP_COUNTS, (0, 100, 10_000)
    if args.smoke:
        args.tasks, args.calls, args.rounds = 300, 50, 1
        reserve_counts, drain_counts = (0, 1, 100), (0, 100)
    print("load average at start:", loadavg())
    if args.part in ("reserve", "both"):
        backends = args.backends.split(",")
        asyncio.run(reserve_part(backends, args.tasks, args.calls, reserve_counts, args.url))
    if args.part in ("drain", "both"):
        drain_part(args.tasks, args.rounds, drain_counts, args.url)
    print("load average at end:", loadavg())


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
