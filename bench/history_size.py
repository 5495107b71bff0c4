"""What a type's history costs to keep (a script, not a test): docs/operations.md#history.

One busy type is recorded once a simulated minute for 31 simulated days (every minute
has activity: each counter and a few run-time buckets move), so its history reaches
its steady state, 2,880 minute buckets (48 h) and 720 hour buckets (30 days). Prints
the bytes that takes on Redis (``MEMORY USAGE`` of its two keys) and in a SQLite file
(its size after ``VACUUM``, less the same file without history), per bucket, per day
of history written and in the steady state; and the time one record takes.

    .venv/bin/python bench/history_size.py [--url redis://127.0.0.1:6390/0] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sqlite3
import tempfile
import time
from pathlib import Path

from benchlib import SMOKE_HELP, redis_server

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.backends.redis import keys
from fleet.backends.redis.backend import RedisBackend
from fleet.core.history import MINUTE, QUEUE_COUNTERS, Reported
from fleet.core.metrics import BUCKETS

TYPE = "history-bench"


async def fill(backend: Backend, minutes: int, bump: object) -> float:
    """Record ``minutes`` busy minutes; the mean seconds per record."""
    rng = random.Random(7)
    counters = dict.fromkeys(QUEUE_COUNTERS, 0)
    hist = [0] * len(BUCKETS)
    timed_out = 0
    t0 = time.time() - minutes * MINUTE
    spent = 0.0
    for i in range(minutes):
        for name in counters:
            counters[name] += rng.randint(50, 400) if name in ("submitted", "completed") else 1
        for b in rng.sample(range(len(BUCKETS)), 4):
            hist[b] += rng.randint(20, 300)
        timed_out += 1
        await bump(counters)  # type: ignore[operator]
        start = time.perf_counter()
        await backend.history.record(TYPE, t0 + i * MINUTE, Reported(timed_out, tuple(hist)))
        spent += time.perf_counter() - start
    return spent / minutes


def sqlite_bytes(path: Path) -> int:
    conn = sqlite3.connect(path)
    conn.execute("VACUUM")
    conn.close()
    return os.path.getsize(path)


async def measure_redis(url: str, minutes: int) -> tuple[int, int, float]:
    backend = await open_backend(url)
    assert isinstance(backend, RedisBackend)
    try:
        counters_key, hist_key, idx_key = keys.history_keys(TYPE)

        async def bump(counters: dict[str, int]) -> None:
            await backend._r.hset(counters_key, mapping=counters)

        per_record = await fill(backend, minutes, bump)
        used = sum([await backend._r.memory_usage(k, samples=0) or 0 for k in (hist_key, idx_key)])
        buckets = await backend._r.zcard(idx_key)
        await backend._r.delete(counters_key, hist_key, idx_key)
        return used, buckets, per_record
    finally:
        await backend.close()


async def measure_sqlite(tmp: Path, minutes: int) -> tuple[int, int, float]:
    empty, full = tmp / "empty.db", tmp / "full.db"
    backend = await open_backend(f"sqlite:///{empty}")
    await backend.close()
    backend = await open_backend(f"sqlite:///{full}")
    db = backend._db  # type: ignore[attr-defined]
    try:

        async def bump(counters: dict[str, int]) -> None:
            def write(c: sqlite3.Connection) -> None:
                for name, value in counters.items():
                    c.execute(
                        "INSERT OR REPLACE INTO task_counters (type, name, value) VALUES (?, ?, ?)",
                        (TYPE, name, value),
                    )

            await db.write(write)

        per_record = await fill(backend, minutes, bump)
        buckets = await db.read(lambda c: c.execute("SELECT COUNT(*) FROM history").fetchone()[0])
    finally:
        await backend.close()
    return sqlite_bytes(full) - sqlite_bytes(empty), int(buckets), per_record


def report(name: str, used: int, buckets: int, per_record: float) -> None:
    per_bucket = used / max(buckets, 1)
    # A busy day writes 1,440 minute buckets and 24 hour buckets.
    print(
        f"{name}: {buckets:,} buckets, {used:,} bytes ({per_bucket:,.0f} per bucket); "
        f"per busy day {per_bucket * (1440 + 24):,.0f} bytes; "
        f"steady state (2,880 + 720 buckets) {per_bucket * 3600:,.0f} bytes; "
        f"{per_record * 1e6:,.0f} us per record"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="a Redis to use (default: a private redis-server)")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    minutes = 3 * 60 if args.smoke else 31 * 24 * 60
    with redis_server(args.url) as url:
        report("redis", *await measure_redis(url, minutes))
    with tempfile.TemporaryDirectory() as tmp:
        report("sqlite", *await measure_sqlite(Path(tmp), minutes))


if __name__ == "__main__":
    asyncio.run(main())
