"""The limiters of the Redis backend (``ctx.limit``): one ``lua/limits.lua`` call
per operation, over the script lane (keys: ``keys.limit_keys``)."""

from __future__ import annotations

from fleet.backends.redis import keys
from fleet.backends.redis.core import RedisCore
from fleet.core.capabilities.limits import CONCURRENCY_RETRY_SECONDS
from fleet.core.records import now


class LimitOps(RedisCore):
    """``limit_acquire``, ``limit_renew`` and ``limit_release``."""

    async def limit_acquire(
        self,
        key: str,
        token: str,
        *,
        interval: float | None,
        concurrency: int | None,
        hold_seconds: float,
    ) -> float:
        argv = [
            "acquire",
            repr(now()),
            token,
            repr(float(hold_seconds)),
            "" if interval is None else repr(float(interval)),
            "" if concurrency is None else str(int(concurrency)),
            repr(CONCURRENCY_RETRY_SECONDS),
        ]
        with self._guard():
            raw = await self._scripts.limits(self._lane, keys.limit_keys(key), argv)
        return float(raw)

    async def limit_renew(self, key: str, token: str, hold_seconds: float) -> bool:
        argv = ["renew", repr(now()), token, repr(float(hold_seconds))]
        with self._guard():
            raw = await self._scripts.limits(self._lane, keys.limit_keys(key), argv)
        return bool(int(raw))

    async def limit_release(self, key: str, token: str) -> bool:
        with self._guard():
            raw = await self._scripts.limits(
                self._lane, keys.limit_keys(key), ["release", repr(now()), token]
            )
        return bool(int(raw))
