"""A worker's start, two checkouts interleaved: ``fleet worker`` spawned with one task
waiting, timed to that task done.

Usage (from the repository root)::

    git worktree add /tmp/fleet-before <commit>
    .venv/bin/python bench/start_ab.py /tmp/fleet-before . --starts 15
    .venv/bin/python bench/start_ab.py /tmp/fleet-before . --python /tmp/user-venv/bin/python

``--python`` runs the workers with another virtualenv's interpreter (one made as a
user's, ``pip install fleet-automation uvloop``, no extra: the ``[otel]`` extra alone
costs a start ~80 ms, redis-py importing the OpenTelemetry SDK). The job is
``bench/noop_plugin.py``. The clock runs from the spawn to the task's ``INCR``, polled
every 2 ms. Medians and the median pairwise ratio after/before are printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import redis
from ab_commits import PRODUCER
from benchlib import HERE, PYTHON, SMOKE_HELP, byte_compile, loadavg, redis_server


def one_start(tree: Path, python: str, url: str) -> float:
    """Seconds from spawning a worker of ``tree`` to its first task done."""
    client = redis.Redis.from_url(url)
    client.flushdb()
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{HERE}", "REDIS_URL": url}
    subprocess.run(
        [PYTHON, "-c", PRODUCER, url, "1", "10"],
        env=env,
        cwd=tree,
        capture_output=True,
        check=True,
    )
    cmd = [python, "-m", "fleet", "--log-level", "WARNING", "worker", "--plugin", "noop_plugin"]
    cmd += ["--type", "noop", "--id", "start", "--backend", url]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=tree)
    try:
        while not client.get("peerbench:done"):
            if time.perf_counter() - t0 > 30:
                raise SystemExit(f"{tree}: no task done within 30 s")
            time.sleep(0.002)
        return time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait(30)
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path, help="checkout started first in each round")
    parser.add_argument("after", type=Path, help="checkout started second in each round")
    parser.add_argument("--starts", type=int, default=15, help="rounds (one start of each)")
    parser.add_argument("--python", default=PYTHON, help="the workers' interpreter")
    parser.add_argument("--url", default=None, help="use this Redis (it is flushed!)")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.starts = 1
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    for tree in trees.values():
        if not (tree / "fleet" / "__init__.py").exists():
            raise SystemExit(f"{tree} is not a Fleet checkout")
        byte_compile(tree)
    print("load average at start:", loadavg(), "python:", args.python)
    times: dict[str, list[float]] = {name: [] for name in trees}
    with redis_server(args.url) as url:
        one_start(trees["before"], args.python, url)  # warm the page cache
        for rnd in range(args.starts):
            for name, tree in trees.items():
                times[name].append(one_start(tree, args.python, url))
            print(f"round {rnd + 1}: " + ", ".join(f"{n} {t[-1]:.3f}" for n, t in times.items()))
    ratios = [a / b for a, b in zip(times["after"], times["before"], strict=True)]
    for name, values in times.items():
        print(f"median {name}: start {statistics.median(values):.3f} s")
    print(f"median pairwise after/before: {statistics.median(ratios):.3f}")
    print("load average at end:", loadavg())


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
