"""KV, locks and counters of the Redis backend (``backend.kv``, ``backend.locks``,
``backend.counters``). What plugins call from their jobs goes over the script
lane: one command each, at a fraction of redis-py's cost."""

from __future__ import annotations

from typing import Any

from fleet.backends.redis.core import RedisPart
from fleet.core.capabilities import KV, Counters, Locks


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


class RedisKV(RedisPart, KV):
    """``fleet:kv:<ns>:<key>`` strings with a TTL."""

    async def set(self, ns: str, key: str, value: str, *, ttl_seconds: float | None = None) -> None:
        args: list[Any] = ["SET", self._keys.kv(ns, key), value]
        if ttl_seconds is not None:
            args += ["PX", _ms(ttl_seconds)]
        with self._guard():
            await self._lane.execute(*args)

    async def setnx(
        self, ns: str, key: str, value: str, *, ttl_seconds: float | None = None
    ) -> bool:
        args: list[Any] = ["SET", self._keys.kv(ns, key), value, "NX"]
        if ttl_seconds is not None:
            args += ["PX", _ms(ttl_seconds)]
        with self._guard():
            done = await self._lane.execute(*args)
        return done is not None

    async def get(self, ns: str, key: str) -> str | None:
        with self._guard():
            value: str | None = await self._lane.execute("GET", self._keys.kv(ns, key))
        return value

    async def get_many(self, ns: str, names: list[str]) -> list[str | None]:
        if self._core._cluster is not None:  # the keys live in many slots: one by one
            return [await self.get(ns, name) for name in names]
        out: list[str | None] = []
        for at in range(0, len(names), 500):  # bounded replies
            chunk = [self._keys.kv(ns, k) for k in names[at : at + 500]]
            with self._guard():
                out += await self._lane.execute("MGET", *chunk)
        return out

    async def delete(self, ns: str, key: str) -> bool:
        with self._guard():
            return bool(await self._lane.execute("DEL", self._keys.kv(ns, key)))


class RedisLocks(RedisPart, Locks):
    """``fleet:lock:<name>`` holding the token, with a TTL."""

    async def acquire(self, name: str, token: str, hold_seconds: float) -> bool:
        with self._guard():
            done = await self._lane.execute(
                "SET", self._keys.lock(name), token, "NX", "PX", _ms(hold_seconds)
            )
        return done is not None

    async def renew(self, name: str, token: str, hold_seconds: float) -> bool:
        with self._guard():
            raw = await self._scripts.lock_renew(
                self._lane, [self._keys.lock(name)], [token, _ms(hold_seconds)]
            )
        return bool(int(raw))

    async def release(self, name: str, token: str) -> bool:
        with self._guard():
            raw = await self._scripts.lock_release(self._lane, [self._keys.lock(name)], [token])
        return bool(int(raw))


class RedisCounters(RedisPart, Counters):
    """``fleet:counter:<name>`` integers."""

    async def incr(self, name: str, n: int = 1) -> int:
        with self._guard():
            return int(await self._lane.execute("INCRBY", self._keys.counter(name), int(n)))

    async def get(self, name: str) -> int:
        with self._guard():
            raw = await self._lane.execute("GET", self._keys.counter(name))
        return 0 if raw is None else int(raw)

    async def set(self, name: str, value: int) -> None:
        with self._guard():
            await self._lane.execute("SET", self._keys.counter(name), int(value))

    async def delete(self, name: str) -> None:
        with self._guard():
            await self._lane.execute("DEL", self._keys.counter(name))
