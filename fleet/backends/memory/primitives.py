"""KV, locks and counters of the memory backend (``backend.kv``, ``backend.locks``,
``backend.counters``). Each method is one synchronous step on the shared store,
so atomic under asyncio."""

from __future__ import annotations

from fleet.backends.memory.store import MemoryStore
from fleet.core.capabilities import KV, Counters, Locks
from fleet.core.records import now


def _kv_key(ns: str, key: str) -> str:
    return f"{ns}\0{key}"


class MemoryKV(KV):
    """Namespaced values with a TTL over the store's expiring map."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    async def set(self, ns: str, key: str, value: str, *, ttl_seconds: float | None = None) -> None:
        self._store.kv.set(_kv_key(ns, key), value, ttl_seconds, now())

    async def setnx(
        self, ns: str, key: str, value: str, *, ttl_seconds: float | None = None
    ) -> bool:
        t = now()
        k = _kv_key(ns, key)
        if self._store.kv.get(k, t) is not None:
            return False
        self._store.kv.set(k, value, ttl_seconds, t)
        return True

    async def get(self, ns: str, key: str) -> str | None:
        return self._store.kv.get(_kv_key(ns, key), now())

    async def delete(self, ns: str, key: str) -> bool:
        return self._store.kv.delete(_kv_key(ns, key), now())


class MemoryLocks(Locks):
    """Locks: a token and an expiry per name."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    async def acquire(self, name: str, token: str, hold_seconds: float) -> bool:
        t = now()
        if self._store.locks.get(name, t) is not None:
            return False
        self._store.locks.set(name, token, hold_seconds, t)
        return True

    async def renew(self, name: str, token: str, hold_seconds: float) -> bool:
        t = now()
        if self._store.locks.get(name, t) != token:
            return False
        self._store.locks.set(name, token, hold_seconds, t)
        return True

    async def release(self, name: str, token: str) -> bool:
        t = now()
        if self._store.locks.get(name, t) != token:
            return False
        return self._store.locks.delete(name, t)


class MemoryCounters(Counters):
    """Counters: one integer per name."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    async def incr(self, name: str, n: int = 1) -> int:
        value = self._store.counters.get(name, 0) + n
        self._store.counters[name] = value
        return value

    async def get(self, name: str) -> int:
        return self._store.counters.get(name, 0)

    async def set(self, name: str, value: int) -> None:
        self._store.counters[name] = int(value)

    async def delete(self, name: str) -> None:
        self._store.counters.pop(name, None)
