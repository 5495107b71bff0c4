"""One-by-one pushes on SQLite, two checkouts interleaved: ``TaskQueues.push_one``
awaited N times on a fresh file, what ``ctx.submit`` and ``sqlite_vs_huey.py``'s
enqueue call.

Usage (from the repository root)::

    git worktree add /tmp/fleet-before <commit>
    .venv/bin/python bench/sqlite_push_ab.py /tmp/fleet-before . --tasks 10000 --rounds 4
    .venv/bin/python bench/sqlite_push_ab.py /tmp/fleet-before . --query '?inline_writes=1'

Each round runs one process per checkout (its tree first on ``sys.path``), default URL
options unless ``--query``. Reported: pushes/s and the process's CPU per push (all
its threads: the writer's and the checkpointer's included), per round and medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchlib import HERE, PYTHON, SMOKE_HELP, byte_compile, loadavg

PUSHER = r"""
import asyncio, sys, tempfile, time
from fleet.backends import open_backend
from fleet.core.submission import make_push_request

async def main(n, query):
    with tempfile.TemporaryDirectory(prefix="fleet-push-") as tmp:
        b = await open_backend(f"sqlite:///{tmp}/f.db{query}")
        await b.configs.set("bench-noop", {"slots": 10})
        for i in range(100):  # warm: statements prepared, pages cached
            await b.queues.push_one("bench-noop", make_push_request({"i": i}))
        cpu0, t0 = time.process_time(), time.perf_counter()
        for i in range(n):
            await b.queues.push_one("bench-noop", make_push_request({"i": i}))
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        print(n / wall, cpu / n * 1e6)
        await b.close()

asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
"""


def one_round(tree: Path, n: int, query: str) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [PYTHON, "-c", PUSHER, str(n), query],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    rate, cpu_us = (float(x) for x in out.stdout.split())
    return rate, cpu_us


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path, help="checkout measured first in each round")
    parser.add_argument("after", type=Path, help="checkout measured second in each round")
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--query", default="", help="URL options, e.g. '?inline_writes=1'")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.tasks, args.rounds = 100, 1
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    for tree in trees.values():
        if not (tree / "fleet" / "__init__.py").exists():
            raise SystemExit(f"{tree} is not a Fleet checkout")
        byte_compile(tree)
    print("load average at start:", loadavg(), "URL options:", args.query or "(default)")
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    for rnd in range(args.rounds):
        for name, tree in trees.items():
            rate, cpu_us = one_round(tree, args.tasks, args.query)
            results[name].append((rate, cpu_us))
            print(f"round {rnd + 1} {name}: {rate:,.0f} pushes/s, {cpu_us:.1f} µs CPU/push")
    for name, rows in results.items():
        rate = statistics.median(r[0] for r in rows)
        cpu_us = statistics.median(r[1] for r in rows)
        print(f"median {name}: {rate:,.0f} pushes/s, {cpu_us:.1f} µs CPU/push")
    print("load average at end:", loadavg())


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
