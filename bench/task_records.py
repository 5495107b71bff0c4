"""Memory per finished task's record on Redis, SQLite and memory (a script, not a test).

For each backend: push ``--tasks`` no-op tasks (``{"i": n}``), reserve, mark started
and ack them all, and report what the finished records take per task, then the same
with one output and one progress report per task (what a task that emits and
reports adds):

* Redis: ``INFO memory`` used_memory after minus before (the done bucket, the
  ``:finished`` index, the record keys), and ``MEMORY USAGE`` of the keys;
* SQLite: the file's pages in use (``page_count - freelist_count``) after minus before;
* memory: ``tracemalloc``'s traced bytes after minus before (the process's heap).

    .venv/bin/python bench/task_records.py [--tasks 20000] [--url redis://...]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import tempfile
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import SMOKE_HELP, loadavg, redis_server

from fleet.backends import open_backend
from fleet.core.submission import make_push_request

TYPE = "rec-bench"


async def finish_all(backend: Any, tasks: int, report: bool) -> None:
    """Push, reserve, mark started and ack ``tasks`` tasks (one output and one
    progress report each if ``report``)."""
    for start in range(0, tasks, 1000):
        n = min(1000, tasks - start)
        await backend.queues.push(TYPE, [make_push_request({"i": start + i}) for i in range(n)])
        got = await backend.queues.reserve(TYPE, k=n, visibility_seconds=60, default_max_attempts=3)
        leases = [(r.body.id, r.token) for r in got]
        await backend.queues.mark_started(TYPE, leases)
        if report:
            for r in got:
                await backend.streams.push(
                    TYPE, {"i": r.body.payload["i"]}, worker_id="b", task_id=r.body.id, attempt=1
                )
                await backend.streams.progress(
                    TYPE, r.body.id, attempt=1, fraction=1.0, message="step 7/7"
                )
        await backend.queues.ack(TYPE, leases)


async def measured(
    url: str, tasks: int, report: bool, usage: Callable[[Any], Awaitable[int]]
) -> float:
    backend = await open_backend(url)
    try:
        await backend.purge_type(TYPE)
        before = await usage(backend)
        await finish_all(backend, tasks, report)
        # the stream is not the record: measure without it
        while await backend.streams.pop(TYPE, 1000):
            pass
        after = await usage(backend)
        return (after - before) / tasks
    finally:
        await backend.close()


async def redis_usage(url: str) -> Callable[[Any], Awaitable[int]]:
    import redis.asyncio as aioredis

    async def used(_: Any) -> int:
        r = aioredis.Redis.from_url(url)
        try:
            return int((await r.info("memory"))["used_memory"])
        finally:
            await r.aclose()

    return used


async def redis_keys(url: str, tasks: int) -> str:
    import redis.asyncio as aioredis

    r = aioredis.Redis.from_url(url, decode_responses=True)
    try:
        parts = []
        for pattern in (f"fleet:queue:{TYPE}:done:*", f"fleet:queue:{TYPE}:finished"):
            total = 0
            async for key in r.scan_iter(match=pattern):
                total += int(await r.memory_usage(key, samples=0) or 0)
            parts.append(f"{pattern.split(':', 3)[3]} {total / tasks:,.0f} B")
        return ", ".join(parts)
    finally:
        await r.aclose()


def sqlite_usage(path: Path) -> Callable[[Any], Awaitable[int]]:
    async def used(_: Any) -> int:
        conn = sqlite3.connect(path)
        try:
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            free = conn.execute("PRAGMA freelist_count").fetchone()[0]
            size = conn.execute("PRAGMA page_size").fetchone()[0]
            return int((pages - free) * size)
        finally:
            conn.close()

    return used


async def memory_usage(_: Any) -> int:
    await asyncio.sleep(0)
    return tracemalloc.get_traced_memory()[0]


async def main(args: argparse.Namespace) -> None:
    n = args.tasks
    print(f"load average: {loadavg()}")
    print(f"bytes per finished task, {n:,} tasks (plain | with 1 output + 1 progress report)")
    with redis_server(args.url) as url:
        used = await redis_usage(url)
        plain = await measured(url, n, False, used)
        keys_plain = await redis_keys(url, n)
        full = await measured(url, n, True, used)
        print(f"redis:  {plain:,.0f} | {full:,.0f}   (MEMORY USAGE, plain: {keys_plain})")
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "fleet.db"
        url = f"sqlite:///{path}"
        plain = await measured(url, n, False, sqlite_usage(path))
        full = await measured(url, n, True, sqlite_usage(path))
        print(f"sqlite: {plain:,.0f} | {full:,.0f}")
    tracemalloc.start()
    plain = await measured("memory://rec-bench-1", n, False, memory_usage)
    full = await measured("memory://rec-bench-2", n, True, memory_usage)
    tracemalloc.stop()
    print(f"memory: {plain:,.0f} | {full:,.0f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--url", default=None, help="a Redis URL (default: a private server)")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    ns = parser.parse_args()
    if ns.smoke:
        ns.tasks = 200
    asyncio.run(main(ns))
