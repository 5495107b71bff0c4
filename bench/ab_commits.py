"""Two checkouts of Fleet back to back, rounds interleaved: one-by-one enqueue and
the drain of one worker process, on one private redis-server.

Usage (from the repository root)::

    git worktree add /tmp/fleet-before <commit>
    .venv/bin/python bench/ab_commits.py /tmp/fleet-before .          # 3 rounds, N = 30,000
    .venv/bin/python bench/ab_commits.py /tmp/fleet-before . --tasks 10000 --rounds 5
    .venv/bin/python bench/ab_commits.py . . --trace-after     # the cost of tracing

Each checkout runs from its own source tree (the working directory of its
processes, so first on ``sys.path``) with this venv's packages. The job is
``bench/noop_plugin.py`` (one ``INCR``, like the peers' jobs). Reported per
round and as medians: enqueue/s and producer CPU per push, drain/s from spawn,
steady/s (10 % to 90 %), time to the first task, worker CPU per task, and the Redis
server's CPU per push and per drained task (``INFO cpu``).
"""

from __future__ import annotations

import argparse
import http.server
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import redis
from benchlib import HERE, PYTHON, SMOKE_HELP, byte_compile, loadavg, redis_server

PRODUCER = r"""
import asyncio, os, sys, time
from fleet.backends import open_backend
from fleet.core.submission import make_push_request

async def main(url, n, slots):
    b = await open_backend(url)
    # Either side of the capability objects (older checkouts: b.config_set).
    configs = getattr(b, "configs", None)
    if configs is not None:
        await configs.set("noop", {"slots": slots})
    else:
        await b.config_set("noop", {"slots": slots})
    # Either side of the queues object (older checkouts: b.push_one).
    push_one = b.queues.push_one if hasattr(b, "queues") else b.push_one
    cpu0, t0 = time.process_time(), time.perf_counter()
    for i in range(n):
        await push_one("noop", make_push_request({"i": i}))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    print(n / wall, cpu / n * 1e3)
    await b.close()

try:
    import uvloop
    uvloop.install()
except ImportError:
    pass
asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
"""


def redis_cpu(client: redis.Redis) -> float:
    """The Redis server's CPU seconds so far (user + system)."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


class _Sink(http.server.BaseHTTPRequestHandler):
    """An OTLP/HTTP endpoint that takes every export and keeps nothing."""

    spans_bytes = 0

    def do_POST(self) -> None:
        size = int(self.headers.get("content-length") or 0)
        _Sink.spans_bytes += len(self.rfile.read(size))
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def otlp_sink() -> str:
    """Start the sink in a thread; its URL (an ``OTEL_EXPORTER_OTLP_ENDPOINT``)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def one_round(
    tree: Path, url: str, n: int, slots: int, extra_env: dict[str, str] | None = None
) -> dict[str, float]:
    client = redis.Redis.from_url(url)
    client.flushdb()
    redis0 = redis_cpu(client)
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{HERE}", "REDIS_URL": url}
    env.update(extra_env or {})
    out = subprocess.run(
        [PYTHON, "-c", PRODUCER, url, str(n), str(slots)],
        env=env,
        cwd=tree,  # '' (the working directory) comes first on sys.path
        capture_output=True,
        text=True,
        check=True,
    )
    rate, producer_ms = (float(x) for x in out.stdout.split())
    redis1 = redis_cpu(client)
    cmd = [PYTHON, "-m", "fleet", "--log-level", "WARNING", "worker", "--plugin", "noop_plugin"]
    cmd += ["--type", "noop", "--id", "ab", "--backend", url]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=tree)
    first = t10 = t90 = None
    deadline = t0 + 300
    while True:
        done = int(client.get("peerbench:done") or 0)
        now = time.perf_counter()
        if done and first is None:
            first = now
        if t10 is None and done >= n * 0.1:
            t10 = now
        if t90 is None and done >= n * 0.9:
            t90 = now
        if done >= n or now > deadline:
            break
        time.sleep(0.005)
    end = time.perf_counter()
    redis2 = redis_cpu(client)
    cpu = psutil.Process(proc.pid).cpu_times()
    proc.terminate()
    proc.wait(30)
    client.close()
    if done < n or first is None or t10 is None or t90 is None:
        raise SystemExit(f"{tree}: only {done} of {n} tasks ran within 300 s")
    return {
        "enqueue/s": rate,
        "producer ms/push": producer_ms,
        "drain/s": n / (end - t0),
        "steady/s": 0.8 * n / (t90 - t10),
        "start s": first - t0,
        "worker ms/task": (cpu.user + cpu.system) / n * 1e3,
        # The server's own CPU: what the scripts and commands cost, whoever waits.
        "redis us/push": (redis1 - redis0) / n * 1e6,
        "redis us/task drained": (redis2 - redis1) / n * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path, help="checkout measured first in each round")
    parser.add_argument("after", type=Path, help="checkout measured second in each round")
    parser.add_argument("--tasks", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--slots", type=int, default=10)
    parser.add_argument("--url", default=None, help="use this Redis (it is flushed!)")
    parser.add_argument(
        "--env-after",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set this in the environment of the second checkout's processes only",
    )
    parser.add_argument(
        "--trace-after",
        action="store_true",
        help="the second checkout's processes trace every task (the [otel] extra) and "
        "export over OTLP/HTTP to a sink in this process: the cost of tracing",
    )
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    after_env = dict(item.split("=", 1) for item in args.env_after)
    if args.trace_after:
        after_env["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlp_sink()
    if args.smoke:
        args.tasks, args.rounds = 200, 1
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    for tree in trees.values():
        if not (tree / "fleet" / "__init__.py").exists():
            raise SystemExit(f"{tree} is not a Fleet checkout")
        # Both trees byte-compiled alike: a tree without __pycache__ would compile its
        # modules at each worker start, counted against that side.
        byte_compile(tree)
    print("load average at start:", loadavg())
    results: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    with redis_server(args.url) as url:
        for rnd in range(args.rounds):
            for name, tree in trees.items():
                extra = after_env if name == "after" else None
                row = one_round(tree, url, args.tasks, args.slots, extra)
                results[name].append(row)
                shown = ", ".join(f"{k} {v:,.3f}" for k, v in row.items())
                print(f"round {rnd + 1} {name}: {shown}", flush=True)
    for name, rows in results.items():
        medians = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        print(f"median {name}: " + ", ".join(f"{k} {v:,.3f}" for k, v in medians.items()))
    if args.trace_after:
        print(f"OTLP bytes received from the second checkout: {_Sink.spans_bytes:,}")
    print("load average at end:", loadavg())


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
