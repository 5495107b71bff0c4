"""Per-task overhead of the worker's slot loop: drain N no-op batch tasks with one
``fleet worker`` process and report tasks/s.

Usage (from the repository root)::

    .venv/bin/python bench/worker_noop.py --backend redis   # starts a private redis-server
    .venv/bin/python bench/worker_noop.py --backend sqlite
    .venv/bin/python bench/worker_noop.py --backend redis://127.0.0.1:6379/0 --tasks 50000

The tasks are pushed first; the clock runs from the first completed task to the
last, so process start-up is not counted. The module doubles as the plugin the
worker loads (type ``bench-noop``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register

TYPE = "bench-noop"
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


class NoopTask(BaseModel):
    i: int = 0


@register(TYPE)
class BenchNoop(BatchAutomation[BaseConfig]):
    Config = BaseConfig
    TaskPayload = NoopTask

    async def run_one(self, task: Task[Any], ctx: Context[BaseConfig]) -> None:
        return None


async def measure(url: str, tasks: int, slots: int) -> tuple[float, float]:
    """Drain ``tasks`` no-op tasks; returns (tasks/s, worker CPU microseconds per task)."""
    from fleet.backends import open_backend
    from fleet.core.submission import make_push_request

    backend = await open_backend(url)
    await backend.purge_type(TYPE)
    await backend.configs.set(TYPE, {"slots": slots})
    for start in range(0, tasks, 5000):
        chunk = [make_push_request({"i": i}) for i in range(start, min(tasks, start + 5000))]
        await backend.queues.push(TYPE, chunk)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)])}
    args = [sys.executable, "-m", "fleet", "--log-level", "WARNING", "worker"]
    args += ["--plugin", "worker_noop", "--type", TYPE, "--id", "bench", "--backend", url]
    spawned = time.perf_counter()
    proc = subprocess.Popen(args, env=env)  # noqa: ASYNC220 - started once, before timing
    cpu = psutil.Process(proc.pid)
    try:
        first: float | None = None
        cpu_first = 0.0
        while True:
            done = (await backend.queues.depths(TYPE)).counters.completed
            if done and first is None:
                first, first_done = time.perf_counter(), done
                cpu_first = sum(cpu.cpu_times()[:2])
            if done >= tasks:
                break
            if proc.poll() is not None:
                raise RuntimeError(f"worker exited with {proc.returncode}")
            await asyncio.sleep(0.01)
        assert first is not None
        elapsed = time.perf_counter() - first
        used = sum(cpu.cpu_times()[:2]) - cpu_first
        n = tasks - first_done
        if n <= 0:
            # A small run can be drained before the first poll: then time it from
            # the spawn, start-up included, rather than divide by nothing.
            n, elapsed, used = tasks, time.perf_counter() - spawned, sum(cpu.cpu_times()[:2])
        return (n / elapsed if elapsed > 0 else float("inf")), used / n * 1e6
    finally:
        proc.terminate()
        proc.wait(30)
        await backend.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="redis", help="redis, sqlite, or a backend URL")
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--slots", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--smoke", action="store_true", help="a smoke run on a tiny input (tests/bench)"
    )
    opts = parser.parse_args()
    if opts.smoke:
        opts.tasks = 200
    server = None
    url = opts.backend
    if url == "redis":
        sys.path.insert(0, str(ROOT))
        from tests.support.redis_server import RedisServer

        server = RedisServer()
        server.start()
        url = server.url
    elif url == "sqlite":
        url = f"sqlite:///{tempfile.mkdtemp(prefix='fleet-bench-')}/bench.db"
    try:
        for _ in range(opts.repeat):
            rate, us = asyncio.run(measure(url, opts.tasks, opts.slots))
            # A tiny run can finish inside one tick of the CPU clock: no figure then.
            per_core = f"{1e6 / us:,.0f}" if us > 0 else "n/a"
            print(
                f"{opts.backend}: {opts.tasks} no-op tasks, {opts.slots} slots: "
                f"{rate:,.0f} tasks/s; worker CPU {us:.0f} us/task "
                f"(= {per_core} tasks/s per fully used core)"
            )
    finally:
        if server is not None:
            server.cleanup()


if __name__ == "__main__":
    main()
