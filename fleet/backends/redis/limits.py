"""The limiters of the Redis backend (``ctx.limit``): one ``lua/limits.lua`` call
per operation, over the script lane (keys: ``KeySpace.limit_keys``)."""

from __future__ import annotations

from typing import Any

from fleet.backends.redis.core import RedisPart
from fleet.core.capabilities.limits import CONCURRENCY_RETRY_SECONDS, Limiters
from fleet.core.records import now


def acquire_argv(
    token: str, *, interval: float | None, concurrency: int | None, hold: float, t: float
) -> list[Any]:
    """The arguments of an ``acquire`` of ``lua/limits.lua`` at time ``t``."""
    return [
        "acquire",
        repr(t),
        token,
        repr(float(hold)),
        "" if interval is None else repr(float(interval)),
        "" if concurrency is None else str(int(concurrency)),
        repr(CONCURRENCY_RETRY_SECONDS),
    ]


def renew_argv(token: str, hold: float, t: float) -> list[Any]:
    """The arguments of a ``renew`` at time ``t`` (answers 1|0)."""
    return ["renew", repr(t), token, repr(float(hold))]


def release_argv(token: str, t: float) -> list[Any]:
    """The arguments of a ``release`` at time ``t`` (answers 1|0)."""
    return ["release", repr(t), token]


class RedisLimits(RedisPart, Limiters):
    """The limiters of ``ctx.limit``: one script call each."""

    async def acquire(
        self,
        key: str,
        token: str,
        *,
        interval: float | None,
        concurrency: int | None,
        hold_seconds: float,
    ) -> float:
        argv = acquire_argv(
            token, interval=interval, concurrency=concurrency, hold=hold_seconds, t=now()
        )
        with self._guard():
            raw = await self._scripts.limits(self._lane, self._keys.limit_keys(key), argv)
        return float(raw)

    async def renew(self, key: str, token: str, hold_seconds: float) -> bool:
        argv = renew_argv(token, hold_seconds, now())
        with self._guard():
            raw = await self._scripts.limits(self._lane, self._keys.limit_keys(key), argv)
        return bool(int(raw))

    async def release(self, key: str, token: str) -> bool:
        argv = release_argv(token, now())
        with self._guard():
            raw = await self._scripts.limits(self._lane, self._keys.limit_keys(key), argv)
        return bool(int(raw))
