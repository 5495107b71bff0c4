"""Shared pieces of the SQLite tests: child processes and task builders."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from fleet.backends.base import Backend
from fleet.core.records import PushRequest, TaskBody, new_id

REPO = Path(__file__).resolve().parents[2]
TYPE = "sqlite-test"


def url_for(path: Path) -> str:
    """The backend URL of a file (absolute, so ``sqlite:////...``)."""
    return f"sqlite:///{path.resolve()}"


def spawn(*args: str, capture: bool = False) -> subprocess.Popen[str]:
    """Start ``python -m tests.sqlite.proc ARGS`` in the repository root."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.sqlite.proc", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE if capture else None,
        text=True,
    )


async def wait_all(procs: Sequence[subprocess.Popen[str]], timeout: float = 45.0) -> list[int]:
    """Exit codes of every process (killing any still running after ``timeout``)."""
    deadline = time.monotonic() + timeout
    codes: list[int] = []
    for proc in procs:
        try:
            left = max(deadline - time.monotonic(), 0.1)
            codes.append(await asyncio.to_thread(proc.wait, left))
        except subprocess.TimeoutExpired:
            proc.kill()
            codes.append(await asyncio.to_thread(proc.wait))
    return codes


def reap(proc: subprocess.Popen[str]) -> None:
    """Kill the child if it still runs and close its pipe."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


async def read_line(proc: subprocess.Popen[str], timeout: float = 10.0) -> str:
    """The child's next stdout line (fails the test instead of hanging)."""
    assert proc.stdout is not None
    line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), timeout)
    assert line, "child exited early"
    return line.strip()


async def push_many(backend: Backend, n: int, automation_type: str = TYPE) -> list[str]:
    """Push ``n`` no-op tasks; their ids."""
    ids = [new_id() for _ in range(n)]
    for start in range(0, n, 2000):
        chunk = ids[start : start + 2000]
        results = await backend.queues.push(
            automation_type, [PushRequest(TaskBody(id=i, payload={"noop": True})) for i in chunk]
        )
        assert all(r.queued for r in results)
    return ids


def executions(paths: Sequence[Path]) -> list[tuple[str, int]]:
    """Every ``(task_id, attempt)`` line the drain children logged."""
    out: list[tuple[str, int]] = []
    for path in paths:
        if path.exists():
            for line in path.read_text().splitlines():
                task_id, attempt = line.split()
                out.append((task_id, int(attempt)))
    return out
