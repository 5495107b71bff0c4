"""Differential: the rules SQLite decides in Python (``fleet.core.limiter``,
``fleet.core.proxy_health``; memory:// is the same engine) against their only other
copy, the Lua of the Redis backend, on the same random operation sequences under one
shared, simulated clock.

Unlike ``test_differential.py``, which goes through the backends' public methods (and
so leaves out what depends on the clock), these call each backend's one step with an
explicit ``now``: the SQLite transaction's functions and
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
from fleet.backends.redis import keys
from fleet.backends.redis import limits as redis_limits
from fleet.backends.redis import proxies as redis_proxies
from fleet.backends.redis.backend import RedisBackend
from fleet.backends.sqlite import limits as sql_limits
from fleet.backends.sqlite import proxies as sql_proxies
from fleet.backends.sqlite.backend import SQLiteBackend

TOKENS = st.sampled_from(["a", "b", "c", "d"])
LIMIT_OPS = st.one_of(
    st.tuples(
        st.just("acquire"),
        TOKENS,
        st.booleans(),  # with the sequence's rate, or without one
        st.sampled_from([None, 1, 2]),
        st.sampled_from([0.5, 2.0]),
    ),
    st.tuples(st.just("renew"), TOKENS, st.sampled_from([0.5, 2.0])),
    st.tuples(st.just("release"), TOKENS),
    st.tuples(st.just("advance"), st.sampled_from([0.0, 0.1, 0.3, 1.0, 2.5])),
)
_keys = itertools.count()


def _wait(raw: float) -> float:
    # Near 1.8e9 s a float's step is 2.4e-7 s: Lua and Python may round a wait
    # computed from the same times differently in that last step.
    return round(float(raw), 6)


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
        argv = redis_limits.acquire_argv(token, interval=iv, concurrency=cap, hold=hold, t=t)
        return _wait(await self._call(key, argv))

    async def renew(self, key: str, token: str, hold: float, t: float) -> bool:
        return bool(int(await self._call(key, redis_limits.renew_argv(token, hold, t))))

    async def release(self, key: str, token: str, t: float) -> bool:
        return bool(int(await self._call(key, redis_limits.release_argv(token, t))))


async def run_limits(
    limiter: Any, key: str, ops: list[tuple[Any, ...]], t0: float, interval: float
) -> list[Any]:
    trace: list[Any] = []
    t = t0
    for op in ops:
        if op[0] == "advance":
            t += op[1]
        elif op[0] == "acquire":
            iv = interval if op[2] else None
            trace.append(await limiter.acquire(key, op[1], iv, op[3], op[4], t))
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
            # The same sequences every run: the coverage checked below holds for them.
            derandomize=True,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        # One rate per limiter, as the code calling ctx.limit passes it. (A rate that
        # changes under one key is forgotten by the Lua when its key's TTL ends on the
        # server's clock, by the Python rule one interval past it on the caller's: the
        # same moment under one clock, which the simulated one here is not.)
        @given(st.lists(LIMIT_OPS, min_size=1, max_size=40), st.sampled_from([0.25, 1.0]))
        def check(ops: list[tuple[Any, ...]], interval: float) -> None:
            key = f"rule-{next(_keys)}"
            # The simulated clock runs ahead of the wall clock, so a Redis TTL (set
            # from the simulated time) never ends a key the sequence still needs.
            t0 = time.time()

            async def both() -> list[list[Any]]:
                sq = await open_backend(sqlite_url)
                rd = await open_backend(redis_url)
                try:
                    assert isinstance(sq, SQLiteBackend) and isinstance(rd, RedisBackend)
                    return [
                        await run_limits(SQLiteLimiter(sq), key, ops, t0, interval),
                        await run_limits(LuaLimiter(rd), key, ops, t0, interval),
                    ]
                finally:
                    await sq.close()
                    await rd.close()

            sqlite, lua = asyncio.run(both())
            ran.append((len(ops), sum(1 for w in sqlite if isinstance(w, float) and w > 0)))
            assert lua == sqlite, (ops, lua, sqlite)

        ran: list[tuple[int, int]] = []
        check()
        # Long sequences ran, and refusals (waits) were among the answers compared.
        assert len(ran) >= 30 and max(n for n, _ in ran) >= 15, ran[:5]
        assert sum(w for _, w in ran) >= 20, sum(w for _, w in ran)


PROXY_NAMES = ["p1", "p2", "p3"]
REPORT = st.tuples(
    st.just("report"),
    st.sampled_from(PROXY_NAMES),
    st.booleans(),
    st.sampled_from([1, 2]),
    st.sampled_from([0.0, 0.5, 3.0]),
)
PROXY_OPS = st.one_of(
    REPORT,  # twice as likely as the others: cool-downs are what takes must get right
    st.tuples(
        st.just("take"),
        st.lists(st.sampled_from(PROXY_NAMES), min_size=1, max_size=2),
        TOKENS,
        st.sampled_from([None, 1, 1, 2]),
        st.sampled_from([0.5, 2.0]),
        st.sampled_from([None, "s1"]),
        st.booleans(),
        st.sampled_from([None, *PROXY_NAMES]),
    ),
    st.tuples(st.just("renew"), st.sampled_from(PROXY_NAMES), TOKENS, st.sampled_from([0.5, 2.0])),
    st.tuples(st.just("release"), st.sampled_from(PROXY_NAMES), TOKENS),
    REPORT,
    st.tuples(st.just("advance"), st.sampled_from([0.0, 0.1, 0.3, 1.0, 2.5])),
)


class SQLiteProxies:
    def __init__(self, backend: SQLiteBackend) -> None:
        self.db = backend._db

    async def take(
        self,
        names: list[str],
        token: str,
        cap: Any,
        hold: float,
        sticky: Any,
        spread: bool,
        held: Any,
        t: float,
    ) -> Any:
        return await self.db.write(
            lambda c: sql_proxies.take(c, names, token, held, cap, hold, sticky, 60.0, t, spread)
        )

    async def renew(self, key: str, token: str, hold: float, t: float) -> bool:
        return await self.db.write(lambda c: sql_proxies.renew(c, key, token, hold, t))

    async def release(self, key: str, token: str, t: float) -> bool:
        return await self.db.write(lambda c: sql_proxies.release(c, key, token, t))

    async def report(self, key: str, ok: bool, threshold: int, cooldown: float, t: float) -> Any:
        return await self.db.write(
            lambda c: sql_proxies.report(c, key, ok, threshold, cooldown, "r", t)
        )


class LuaProxies:
    def __init__(self, backend: RedisBackend) -> None:
        self.backend = backend

    async def _call(self, call: tuple[list[str], list[Any]]) -> Any:
        b = self.backend
        return await b._scripts.proxies(b._lane, *call)

    async def take(
        self,
        names: list[str],
        token: str,
        cap: Any,
        hold: float,
        sticky: Any,
        spread: bool,
        held: Any,
        t: float,
    ) -> Any:
        call = redis_proxies.take_call(
            keys.DEFAULT,
            names,
            token,
            held=held,
            cap=cap,
            hold=hold,
            sticky=sticky,
            sticky_seconds=60.0,
            spread=spread,
            automation_type=None,
            t=t,
        )
        return redis_proxies.take_answer(await self._call(call))

    async def renew(self, key: str, token: str, hold: float, t: float) -> bool:
        return bool(
            int(await self._call(redis_proxies.renew_call(keys.DEFAULT, key, token, hold, t)))
        )

    async def release(self, key: str, token: str, t: float) -> bool:
        return bool(int(await self._call(redis_proxies.release_call(keys.DEFAULT, key, token, t))))

    async def report(self, key: str, ok: bool, threshold: int, cooldown: float, t: float) -> Any:
        call = redis_proxies.report_call(
            keys.DEFAULT,
            key,
            ok=ok,
            threshold=threshold,
            cooldown=cooldown,
            reason="r",
            automation_type=None,
            t=t,
        )
        raw = await self._call(call)
        return None if raw is None or raw == "" else float(raw)


async def run_proxies(
    proxies: Any, prefix: str, ops: list[tuple[Any, ...]], t0: float
) -> list[Any]:
    """Apply ``ops`` with every proxy and sticky name under ``prefix`` (a fresh set of
    records per sequence); the trace of every answer, times relative to ``t0``."""
    trace: list[Any] = []
    t = t0

    def rel(x: float | None) -> float | None:
        return None if x is None else round(x - t0, 6)

    for op in ops:
        kind = op[0]
        if kind == "advance":
            t += op[1]
        elif kind == "take":
            _, names, token, cap, hold, sticky, spread, held = op
            got = await proxies.take(
                [prefix + n for n in names],
                token,
                cap,
                hold,
                None if sticky is None else prefix + sticky,
                spread,
                None if held is None else prefix + held,
                t,
            )
            key = None if got.key is None else got.key.removeprefix(prefix)
            trace.append(("take", key, got.cooling, round(got.wait, 6)))
        elif kind == "renew":
            trace.append(await proxies.renew(prefix + op[1], op[2], op[3], t))
        elif kind == "release":
            trace.append(await proxies.release(prefix + op[1], op[2], t))
        else:
            _, name, ok, threshold, cooldown = op
            trace.append(rel(await proxies.report(prefix + name, ok, threshold, cooldown, t)))
    return trace


@pytest.mark.slow
def test_proxy_health_answers_alike_in_python_and_in_lua(redis_url: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        sqlite_url = f"sqlite:///{Path(tmp) / 'proxies.db'}"

        @settings(
            max_examples=300,
            # The same sequences every run: the coverage checked below holds for them.
            derandomize=True,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(st.lists(PROXY_OPS, min_size=1, max_size=40))
        def check(ops: list[tuple[Any, ...]]) -> None:
            prefix = f"x{next(_keys)}-"
            t0 = time.time()

            async def both() -> list[list[Any]]:
                sq = await open_backend(sqlite_url)
                rd = await open_backend(redis_url)
                try:
                    assert isinstance(sq, SQLiteBackend) and isinstance(rd, RedisBackend)
                    return [
                        await run_proxies(SQLiteProxies(sq), prefix, ops, t0),
                        await run_proxies(LuaProxies(rd), prefix, ops, t0),
                    ]
                finally:
                    await sq.close()
                    await rd.close()

            sqlite, lua = asyncio.run(both())
            takes = [a for a in sqlite if isinstance(a, tuple)]
            ran.append(
                (
                    len(ops),
                    sum(1 for a in takes if a[1] is None),
                    sum(1 for a in takes if a[2]),
                )
            )
            assert lua == sqlite, (ops, lua, sqlite)

        ran: list[tuple[int, int, int]] = []
        check()
        # Long sequences ran; refused takes and takes of a cooling proxy were compared.
        assert len(ran) >= 30 and max(n for n, _, _ in ran) >= 15
        refused, cooling = sum(r for _, r, _ in ran), sum(c for _, _, c in ran)
        assert refused >= 5 and cooling >= 3, (refused, cooling)
