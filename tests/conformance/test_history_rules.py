"""Differential: the history rules SQLite applies in Python (memory:// is the same engine)
(``fleet.core.history``) against their only other copy, ``lua/history_record.lua``, on
the same random sequences of counter changes, worker reports and records under one
simulated clock (as ``test_differential_rules.py`` does for limiters and proxies)."""

from __future__ import annotations

import asyncio
import itertools
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleet.backends import open_backend
from fleet.backends.redis import history as redis_history
from fleet.backends.redis import keys
from fleet.backends.redis.backend import RedisBackend
from fleet.backends.sqlite import history as sql_history
from fleet.backends.sqlite.backend import SQLiteBackend
from fleet.core.history import (
    HOUR,
    MINUTE,
    QUEUE_COUNTERS,
    Reported,
    bucket_start,
    points,
)
from fleet.core.metrics import BUCKETS

OPS = st.one_of(
    # a queue counter moves (a negative step: the type was purged, its counters reset)
    st.tuples(st.just("count"), st.sampled_from(QUEUE_COUNTERS), st.integers(-3, 5)),
    st.tuples(
        st.just("report"),
        st.integers(0, 4),
        st.lists(st.integers(0, 6), min_size=len(BUCKETS), max_size=len(BUCKETS)),
    ),
    st.tuples(st.just("record")),
    st.tuples(st.just("record")),
    st.tuples(
        st.just("advance"),
        st.sampled_from([0.0, 0.4, 30.0, 61.0, 3599.0, 49 * HOUR, 31 * 24 * HOUR]),
    ),
)
_types = itertools.count()


class SQLite:
    def __init__(self, backend: SQLiteBackend) -> None:
        self.backend = backend
        self.db = backend._db

    async def set_counters(self, t: str, counters: dict[str, int]) -> None:
        def write(c: Any) -> None:
            for name, value in counters.items():
                c.execute(
                    "INSERT INTO task_counters (type, name, value) VALUES (?, ?, ?) "
                    "ON CONFLICT (type, name) DO UPDATE SET value = excluded.value",
                    (t, name, value),
                )

        await self.db.write(write)

    async def record(self, t: str, reported: Reported, at: float) -> bool:
        return await self.db.write(lambda c: sql_history.record(c, t, reported, at))

    async def buckets(self, t: str, res: int, starts: list[int]) -> dict[int, list[int]]:
        return await self.backend.history.buckets(t, res, starts)


class Lua:
    def __init__(self, backend: RedisBackend) -> None:
        self.backend = backend

    async def set_counters(self, t: str, counters: dict[str, int]) -> None:
        await self.backend._r.hset(keys.history_keys(t)[0], mapping=counters)

    async def record(self, t: str, reported: Reported, at: float) -> bool:
        b = self.backend
        argv = redis_history.record_argv(reported, at)
        return bool(int(await b._scripts.history_record(b._lane, keys.history_keys(t), argv)))

    async def buckets(self, t: str, res: int, starts: list[int]) -> dict[int, list[int]]:
        return await self.backend.history.buckets(t, res, starts)


async def run(side: Any, t: str, ops: list[tuple[Any, ...]], t0: float) -> list[Any]:
    """Apply ``ops``; the trace of every record's answer and of what a read finds."""
    counters = dict.fromkeys(QUEUE_COUNTERS, 0)
    reported = Reported()
    trace: list[Any] = []
    at = t0
    await side.set_counters(t, counters)
    for op in ops:
        if op[0] == "count":
            counters[op[1]] = max(counters[op[1]] + op[2], 0)
            await side.set_counters(t, counters)
        elif op[0] == "report":
            reported = Reported(timed_out=op[1], durations=tuple(op[2]))
        elif op[0] == "advance":
            at += op[1]
        else:
            trace.append(await side.record(t, reported, at))
    # Every bucket a record may have written, and the windows read from them.
    for res in (MINUTE, HOUR):
        # the first buckets (trimmed once the clock moved far enough) and the newest
        first, last = bucket_start(t0, res), bucket_start(at, res)
        early = range(first, min(first + 3 * HOUR, last + res), res)
        recent = range(max(first, last - 31 * 24 * HOUR), last + res, res)
        starts = sorted({*early, *recent})
        found = await side.buckets(t, res, starts)
        trace.append((res, sorted(found.items())))
        window = {MINUTE: "1h", HOUR: "30d"}[res]
        trace.append(points(t, window, at, found))
    return trace


@pytest.mark.slow
def test_history_records_alike_in_python_and_in_lua(redis_url: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        sqlite_url = f"sqlite:///{Path(tmp) / 'history.db'}"

        @settings(
            max_examples=150,
            derandomize=True,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(st.lists(OPS, min_size=1, max_size=30))
        def check(ops: list[tuple[Any, ...]]) -> None:
            t = f"hist-{next(_types)}"
            t0 = time.time()

            async def both() -> list[list[Any]]:
                sq = await open_backend(sqlite_url)
                rd = await open_backend(redis_url)
                try:
                    assert isinstance(sq, SQLiteBackend) and isinstance(rd, RedisBackend)
                    return [
                        await run(SQLite(sq), t, ops, t0),
                        await run(Lua(rd), t, ops, t0),
                    ]
                finally:
                    await sq.close()
                    await rd.close()

            sqlite, lua = asyncio.run(both())
            ran.append(sum(1 for x in sqlite if x is True))
            assert lua == sqlite, (ops, lua, sqlite)

        ran: list[int] = []
        check()
        # Records that wrote buckets were among those compared.
        assert len(ran) >= 30 and sum(ran) >= 50, ran[:10]
