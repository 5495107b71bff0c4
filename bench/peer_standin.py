"""A stand-in for the shared peer harness (``../shared/bench/peers/common.py``) when
that folder is not there: the part of its protocol Fleet's entry uses, for
``fleet_bench.py --smoke`` (a smoke run, not a measurement).

Like the harness it looks the distribution's version up by ``Spec.package``,
runs ``setup``, the bulk enqueue (then flushes it), the one-by-one enqueue of N
tasks, then ONE worker process (``Spec.worker_cmd``) until the job counter
``DONE_KEY`` reaches N; it appends one JSON line to ``RESULTS_DIR/<name>.jsonl``
and prints a one-line summary. Use the real harness for figures.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import version as pkg_version
from typing import Any

import redis

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6390/0")
N = int(os.environ.get("N", "200"))
DONE_KEY = os.environ.get("DONE_KEY", "peerbench:done")
DRAIN_TIMEOUT = float(os.environ.get("DRAIN_TIMEOUT", "60"))
RESULTS_DIR = os.environ.get("RESULTS_DIR", tempfile.mkdtemp(prefix="peer-standin-"))


@dataclass
class Spec:
    name: str
    package: str
    concurrency: str
    worker_cmd: list[str]
    enqueue_one: Callable[[int], Any]
    enqueue_bulk: Callable[[int], Any] | None = None
    bulk_desc: str = ""
    setup: Callable[[], Any] | None = None
    teardown: Callable[[], Any] | None = None
    notes: str = ""
    worker_env: dict[str, str] = field(default_factory=dict)
    stop_grace: float = 8.0


def _call(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any) -> Any:
    result = fn(*args)
    if inspect.isawaitable(result):
        return loop.run_until_complete(result)
    return result


def run(spec: Spec) -> dict[str, Any]:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    r = redis.Redis.from_url(REDIS_URL)
    r.flushdb()
    res: dict[str, Any] = {"name": spec.name, "version": pkg_version(spec.package), "n": N}
    if spec.enqueue_bulk is not None:
        if spec.setup:
            _call(loop, spec.setup)
        t0 = time.perf_counter()
        _call(loop, spec.enqueue_bulk, N)
        res["enqueue_bulk_rate"] = round(N / (time.perf_counter() - t0), 1)
        r.flushdb()
    if spec.setup:
        _call(loop, spec.setup)
    t0 = time.perf_counter()
    for i in range(N):
        _call(loop, spec.enqueue_one, i)
    res["enqueue_one_rate"] = round(N / (time.perf_counter() - t0), 1)
    if spec.teardown:
        _call(loop, spec.teardown)
    env = {**os.environ, **spec.worker_env}
    t0 = time.perf_counter()
    proc = subprocess.Popen(spec.worker_cmd, env=env, start_new_session=True)
    done = 0
    try:
        while done < N:
            done = int(r.get(DONE_KEY) or 0)
            if time.perf_counter() - t0 > DRAIN_TIMEOUT:
                res["error"] = f"timeout after {DRAIN_TIMEOUT}s with {done}/{N} done"
                break
            if proc.poll() is not None:
                res["error"] = f"worker exited rc={proc.returncode} with {done}/{N} done"
                break
            time.sleep(0.01)
        else:
            res["drain_rate"] = round(N / (time.perf_counter() - t0), 1)
    finally:
        proc.terminate()
        try:
            proc.wait(spec.stop_grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    res["final_count"] = int(r.get(DONE_KEY) or 0)
    r.flushdb()
    r.close()
    loop.close()
    os.makedirs(RESULTS_DIR, exist_ok=True)
    with open(os.path.join(RESULTS_DIR, f"{spec.name}.jsonl"), "a") as f:
        f.write(json.dumps(res) + "\n")
    print(json.dumps(res), flush=True)
    if "error" in res:
        sys.exit(1)
    return res
