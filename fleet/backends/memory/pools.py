"""Pools of the memory backend (``backend.pools``): one
:class:`~fleet.backends.memory.pool.MemoryPool` per name in the store."""

from __future__ import annotations

import asyncio
from typing import Any

from fleet.backends.memory.store import MemoryStore
from fleet.core.capabilities import Pools
from fleet.core.errors import ContractValueError
from fleet.core.records import PoolClaim, PoolItem, PoolStats, PoolStrategy, new_token, now


class MemoryPools(Pools):
    """Each method one synchronous step on the named pool (atomic under asyncio)."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    async def put(
        self,
        name: str,
        payload: Any,
        tags: dict[str, Any],
        *,
        ttl_seconds: float | None = None,
        item_id: str | None = None,
    ) -> str:
        return self._store.pool(name).put(
            payload, tags, ttl_seconds=ttl_seconds, item_id=item_id, now=now()
        )

    async def claim(
        self,
        name: str,
        *,
        where: dict[str, Any] | None = None,
        hold_seconds: float = 60.0,
        strategy: PoolStrategy = "freshest",
    ) -> PoolClaim | None:
        if strategy not in ("freshest", "oldest", "random"):
            raise ContractValueError(f"unknown claim strategy {strategy!r}", field="strategy")
        await asyncio.sleep(0)
        return self._store.pool(name).claim(where, hold_seconds, strategy, now(), new_token())

    async def release(self, name: str, item_id: str, token: str) -> bool:
        return self._store.pool(name).release(item_id, token, now())

    async def evict(self, name: str, item_id: str, token: str) -> bool:
        return self._store.pool(name).evict(item_id, token, now())

    async def extend(self, name: str, item_id: str, token: str, hold_seconds: float) -> bool:
        return self._store.pool(name).extend(item_id, token, hold_seconds, now())

    async def items(
        self, name: str, *, where: dict[str, Any] | None = None, n: int = 50
    ) -> list[PoolItem]:
        return self._store.pool(name).available(where, n, now())

    async def size(self, name: str, *, where: dict[str, Any] | None = None) -> int:
        return self._store.pool(name).size(where, now())

    async def remove(self, name: str, item_id: str) -> bool:
        return self._store.pool(name).remove(item_id, now())

    async def prune(self, name: str) -> int:
        pool = self._store.pools.get(name)
        return 0 if pool is None else pool.maintain(now())

    async def names(self) -> list[str]:
        t = now()
        names = []
        for name, pool in self._store.pools.items():
            pool.maintain(t)
            if pool.items:
                names.append(name)
        return sorted(names)

    async def stats(self, name: str) -> PoolStats:
        pool = self._store.pools.get(name)
        if pool is None:
            return PoolStats(name=name, total=0, available=0, claimed=0, expiring_soon=0)
        return pool.stats(now())

    async def drop(self, name: str) -> int:
        pool = self._store.pools.pop(name, None)
        if pool is None:
            return 0
        pool.maintain(now())
        return len(pool.items)
