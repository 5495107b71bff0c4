"""Helpers shared by the bench scripts: a throwaway redis-server, child
processes in their own process group, percentiles, the machine's load."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PYTHON = sys.executable
#: Fleet's distribution name on PyPI (the import package is ``fleet``; ``fleet`` on
#: PyPI is an unrelated project). The peer harness looks its version up by this name.
DISTRIBUTION = "fleet-automation"
#: ``--smoke``: every script runs once on a tiny input (tests/bench/test_bench_smoke.py).
SMOKE_HELP = "a smoke run on a tiny input (tests/bench), not a measurement"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def pct(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(0, min(len(ordered) - 1, round(p / 100 * len(ordered)) - 1))
    return ordered[rank]


async def redis_cpu(client: Any) -> float:
    """Seconds of CPU redis-server has used (``INFO cpu``, user + system), read
    through a redis.asyncio client."""
    info = await client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


@contextlib.contextmanager
def redis_server(url: str | None = None) -> Iterator[str]:
    """``url`` if given, else a private redis-server on a free port (no persistence)."""
    if url:
        yield url
        return
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="fleet-bench-")
    proc = subprocess.Popen(
        [
            shutil.which("redis-server") or "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            workdir,
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


def byte_compile(tree: Path = ROOT) -> None:
    """Byte-compile a checkout's ``fleet`` and ``bench`` folders. Where
    ``PYTHONDONTWRITEBYTECODE`` is set (this workplace sets it) a process importing
    from a tree without ``__pycache__`` compiles every module it imports, each time:
    a worker's start would count that compile."""
    subprocess.run(
        [PYTHON, "-m", "compileall", "-q", str(tree / "fleet"), str(tree / "bench")],
        check=True,
        stdout=subprocess.DEVNULL,
    )


_compiled = False


def spawn(
    args: list[str], env: dict[str, str] | None = None, log: str | None = None
) -> subprocess.Popen[bytes]:
    """Start a child in its own process group (stopped with :func:`stop`); this
    checkout is byte-compiled before the first one (:func:`byte_compile`)."""
    global _compiled
    if not _compiled:
        byte_compile()
        _compiled = True
    full_env = {**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{ROOT}", **(env or {})}
    out = open(log, "wb") if log else subprocess.DEVNULL
    return subprocess.Popen(
        args, env=full_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
    )


def stop(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM the child's process group, SIGKILL after ``grace`` seconds."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


def worker_cmd(url: str, plugin: str, automation_type: str, worker_id: str = "bench") -> list[str]:
    return [
        PYTHON,
        "-m",
        "fleet",
        "--log-level",
        "WARNING",
        "worker",
        "--plugin",
        plugin,
        "--type",
        automation_type,
        "--id",
        worker_id,
        "--backend",
        url,
    ]


@dataclasses.dataclass(frozen=True)
class Drained:
    """What :func:`poll_drain` measured."""

    spawn_rate: float  # tasks/s from spawn to the last task (start-up included)
    steady: float  # tasks/s from the first task done to the last
    cpu_ms: float  # the workers' CPU per task (their child processes included)


async def poll_drain(
    procs: list[subprocess.Popen[bytes]],
    done: Callable[[], Awaitable[int]],
    tasks: int,
    t0: float,
    timeout: float = 600.0,
) -> Drained:
    """Poll ``done`` (tasks finished so far) every 20 ms until it reaches ``tasks``;
    ``t0`` is when the workers were spawned.

    Raises:
        RuntimeError: A worker exited, or ``timeout`` seconds passed.
    """
    import psutil

    ps = [psutil.Process(p.pid) for p in procs]
    first: float | None = None
    first_done = 0
    cpu = 0.0
    while True:
        # children too: `huey_consumer -k process` works in child processes
        with contextlib.suppress(psutil.NoSuchProcess):
            cpu = sum(sum(q.cpu_times()[:2]) for p in ps for q in [p, *p.children(recursive=True)])
        n = await done()
        if n and first is None:
            first, first_done = time.perf_counter(), n
        if n >= tasks:
            break
        if any(p.poll() is not None for p in procs):
            raise RuntimeError("a worker exited")
        if time.perf_counter() - t0 > timeout:
            raise RuntimeError(f"only {n} of {tasks} done after {timeout:g} s")
        await asyncio.sleep(0.02)
    t_end = time.perf_counter()
    assert first is not None
    steady = (tasks - first_done) / max(t_end - first, 1e-9) if t_end > first else 0.0
    return Drained(tasks / (t_end - t0), steady, cpu / tasks * 1000)
