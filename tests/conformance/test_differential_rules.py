"""Differential: the rules memory and SQLite decide in Python (``fleet.core.limiter``)
against their only other copy, the Lua of the Redis backend, on the same random
operation sequences under one shared, simulated clock.

Unlike ``test_differential.py``, which goes through the backends' public methods (and
so leaves out what depends on the clock), these call each backend's one step with an
explicit ``now``: the memory table's functions, the SQLite transaction's functions and
the Redis script, so rates, hold ends and expiry are compared too.
"""

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
from fleet.backends.memory import limits as mem_limits
from fleet.backends.redis import keys
from fleet.backends.redis.backend import RedisBackend
from fleet.backends.sqlite import limits as sql_limits
from fleet.backends.sqlite.backend import SQLiteBackend
from fleet.core.capabilities.limits import CONCURRENCY_RETRY_SECONDS

TOKENS = st.sampled_from(["a", "b", "c", "d"])
LIMIT_OPS = st.one_of(
    st.tuples(
        st.just("acquire"),
        TOKENS,
        st.sampled_from([None, 0.25, 1.0]),
        st.sampled_from([None, 1, 2]),
        st.sampled_from([0.5, 2.0]),
    ),
    st.tuples(st.just("renew"), TOKENS, st.sampled_from([0.5, 2.0])),
    st.tuples(st.just("release"), TOKENS),
    st.tuples(st.just("advance"), st.sampled_from([0.0, 0.1, 0.3, 1.0, 2.5])),
)
_keys = itertools.count()


def _wait(raw: float) -> float:
    return round(float(raw), 9)


class MemoryLimiter:
    def __init__(self) -> None:
        self.table = mem_limits.LimitTable()

    async def acquire(self, key: str, token: str, iv: Any, cap: Any, hold: float, t: float) -> Any:
        got = mem_limits.acquire(
            self.table, key, token, interval=iv, concurrency=cap, hold=hold, t=t
        )
        return _wait(got)

    async def renew(self, key: str, token: str, hold: float, t: float) -> bool:
        return mem_limits.renew(self.table, key, token, hold, t)

    async def release(self, key: str, token: str, t: float) -> bool:
        return mem_limits.release(self.table, key, token, t)


class SQLiteLimiter:
    def __init__(self, backend: SQLiteBackend) -> None:
        self.db = backend._db

    async def acquire(self, key: str, token: str, iv: Any, cap: Any, hold: float, t: float) -> Any:
        got = await self.db.write(lambda c: sql_limits.acquire(c, key, token, iv, cap, hold, t))
        return _wait(got)

    async def renew(self, key: str, token: str, hold: float, t: float) -> bool:
        return await self.db.write(lambda c: sql_limits.renew(c, key, token, hold, t))

    async def release(self, key: str, token: str, t: float) -> bool:
        return await self.db.write(lambda c: sql_limits.release(c, key, token, t))


class LuaLimiter:
    def __init__(self, backend: RedisBackend) -> None:
        self.backend = backend

    async def _call(self, key: str, argv: list[Any]) -> Any:
        b = self.backend
        return await b._scripts.limits(b._lane, keys.limit_keys(key), argv)

    async def acquire(self, key: str, token: str, iv: Any, cap: Any, hold: float, t: float) -> Any:
        argv = [
            "acquire",
            repr(t),
            token,
            repr(hold),
            "" if iv is None else repr(iv),
            "" if cap is None else str(cap),
            repr(CONCURRENCY_RETRY_SECONDS),
        ]
        return _wait(await self._call(key, argv))

    async def renew(self, key: str, token: str, hold: float, t: float) -> bool:
        return bool(int(await self._call(key, ["renew", repr(t), token, repr(hold)])))

    async def release(self, key: str, token: str, t: float) -> bool:
        return bool(int(await self._call(key, ["release", repr(t), token])))


async def run_limits(limiter: Any, key: str, ops: list[tuple[Any, ...]], t0: float) -> list[Any]:
    trace: list[Any] = []
    t = t0
    for op in ops:
        if op[0] == "advance":
            t += op[1]
        elif op[0] == "acquire":
            trace.append(await limiter.acquire(key, op[1], op[2], op[3], op[4], t))
        elif op[0] == "renew":
            trace.append(await limiter.renew(key, op[1], op[2], t))
        else:
            trace.append(await limiter.release(key, op[1], t))
    return trace


@pytest.mark.slow
def test_limiters_answer_alike_in_python_and_in_lua(redis_url: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        sqlite_url = f"sqlite:///{Path(tmp) / 'rules.db'}"

        @settings(
            max_examples=300,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(st.lists(LIMIT_OPS, min_size=1, max_size=40))
        def check(ops: list[tuple[Any, ...]]) -> None:
            key = f"rule-{next(_keys)}"
            # The simulated clock runs ahead of the wall clock, so a Redis TTL (set
            # from the simulated time) never ends a key the sequence still needs.
            t0 = time.time()

            async def all_three() -> list[list[Any]]:
                sq = await open_backend(sqlite_url)
                rd = await open_backend(redis_url)
                try:
                    assert isinstance(sq, SQLiteBackend) and isinstance(rd, RedisBackend)
                    return [
                        await run_limits(MemoryLimiter(), key, ops, t0),
                        await run_limits(SQLiteLimiter(sq), key, ops, t0),
                        await run_limits(LuaLimiter(rd), key, ops, t0),
                    ]
                finally:
                    await sq.close()
                    await rd.close()

            memory, sqlite, lua = asyncio.run(all_three())
            ran.append((len(ops), sum(1 for w in memory if isinstance(w, float) and w > 0)))
            assert sqlite == memory, (ops, sqlite, memory)
            assert lua == memory, (ops, lua, memory)

        ran: list[tuple[int, int]] = []
        check()
        # Long sequences ran, and refusals (waits) were among the answers compared.
        assert len(ran) >= 30 and max(n for n, _ in ran) >= 15, ran[:5]
        assert sum(w for _, w in ran) >= 20, sum(w for _, w in ran)
