"""Pools of the Redis backend (``backend.pools``): the spec's hash and claim keys plus zset indexes.

Each pool keeps, besides ``fleet:pool:<name>`` and its claim keys, an
*available* zset (unclaimed items by expiry), a *claimed* zset (items by lease
end), an *expiry* zset, and one zset per ``(tag field, JSON value)`` holding the
available items with that tag. Claim, release, put and prune are therefore
O(log N) per index touched; a ``where`` on several fields walks the smallest
of its tag indexes and checks the other fields.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from fleet.backends.redis import keys
from fleet.backends.redis.core import RedisPart
from fleet.core.capabilities import Pools
from fleet.core.records import (
    PoolClaim,
    PoolItem,
    PoolStats,
    PoolStrategy,
    dumps,
    new_id,
    new_token,
    now,
)

#: Items one prune or drop script call handles (keeps every script short).
POOL_CHUNK = 1000
#: Items expiring within this many seconds count as ``expiring_soon``.
EXPIRING_SOON_SECONDS = 60.0


def encode_item(
    payload: Any, tags: dict[str, Any], expires_at: float | None, created_at: float
) -> str:
    """The stored JSON of an item: ``{p: base64 payload JSON, t, x, c, i}``.

    ``i`` lists the item's tag index suffixes, so scripts never encode JSON.
    """
    return dumps(
        {
            "p": base64.b64encode(dumps(payload).encode("utf-8")).decode("ascii"),
            "t": tags,
            "x": expires_at,
            "c": created_at,
            "i": [keys.pool_tag_suffix(f, v) for f, v in sorted(tags.items())],
        }
    )


def decode_item(item_id: str, raw: str) -> PoolItem:
    """A :class:`PoolItem` from its stored JSON."""
    d = json.loads(raw)
    x = d.get("x")
    return PoolItem(
        id=item_id,
        payload=json.loads(base64.b64decode(d["p"])),
        tags=dict(d.get("t") or {}),
        expires_at=None if x is None else float(x),
        created_at=float(d.get("c") or 0.0),
    )


def where_suffixes(where: dict[str, Any] | None) -> list[str]:
    """Tag index suffixes a ``where`` filter must all match."""
    return [keys.pool_tag_suffix(f, v) for f, v in sorted((where or {}).items())]


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


class RedisPools(RedisPart, Pools):
    """Pool methods of the Redis backend."""

    def _pool_call_args(self, name: str, t: float) -> tuple[list[str], list[Any]]:
        return self._keys.pool_keys(name), [
            repr(t),
            name,
            self._keys.pool_claim_prefix(name),
            self._keys.pool_tag_prefix(name),
        ]

    async def _pool_op(self, name: str, *args: Any) -> Any:
        k, argv = self._pool_call_args(name, now())
        with self._guard():
            return await self._scripts.pool_ops(self._lane, k, [*argv, *args])

    async def put(
        self,
        name: str,
        payload: Any,
        tags: dict[str, Any],
        *,
        ttl_seconds: float | None = None,
        item_id: str | None = None,
    ) -> str:
        t = now()
        item_id = item_id or new_id()
        expires = None if ttl_seconds is None else t + ttl_seconds
        raw = encode_item(payload, json.loads(dumps(tags)), expires, t)
        k, argv = self._pool_call_args(name, t)
        with self._guard():
            expiry = "" if expires is None else repr(expires)
            await self._scripts.pool_ops(self._lane, k, [*argv, "put", item_id, raw, expiry])
        return item_id

    async def claim(
        self,
        name: str,
        *,
        where: dict[str, Any] | None = None,
        hold_seconds: float = 60.0,
        strategy: PoolStrategy = "freshest",
    ) -> PoolClaim | None:
        t = now()
        token = new_token()
        k, argv = self._pool_call_args(name, t)
        argv += [repr(float(hold_seconds)), _ms(hold_seconds), token, strategy]
        with self._guard():
            raw = await self._scripts.pool_claim(self._lane, k, [*argv, *where_suffixes(where)])
        if not raw:
            return None
        return PoolClaim(
            item=decode_item(raw[0], raw[1]), token=token, lease_until=t + hold_seconds
        )

    async def release(self, name: str, item_id: str, token: str) -> bool:
        return bool(int(await self._pool_op(name, "release", item_id, token)))

    async def evict(self, name: str, item_id: str, token: str) -> bool:
        return bool(int(await self._pool_op(name, "evict", item_id, token)))

    async def extend(self, name: str, item_id: str, token: str, hold_seconds: float) -> bool:
        raw = await self._pool_op(
            name, "extend", item_id, token, repr(float(hold_seconds)), _ms(hold_seconds)
        )
        return bool(int(raw))

    async def items(
        self, name: str, *, where: dict[str, Any] | None = None, n: int = 50
    ) -> list[PoolItem]:
        k, argv = self._pool_call_args(name, now())
        with self._guard():
            raw = await self._scripts.pool_query(
                self._lane, k, [*argv, "list", n, *where_suffixes(where)]
            )
        return [decode_item(raw[i], raw[i + 1]) for i in range(0, len(raw), 2)]

    async def size(self, name: str, *, where: dict[str, Any] | None = None) -> int:
        k, argv = self._pool_call_args(name, now())
        with self._guard():
            raw = await self._scripts.pool_query(
                self._lane, k, [*argv, "size", 0, *where_suffixes(where)]
            )
        return int(raw)

    async def remove(self, name: str, item_id: str) -> bool:
        return bool(int(await self._pool_op(name, "remove", item_id)))

    async def prune(self, name: str) -> int:
        total = 0
        while True:
            removed, seen, back = await self._pool_op(name, "prune", POOL_CHUNK)
            total += int(removed)
            if int(seen) < POOL_CHUNK and int(back) < POOL_CHUNK:
                return total

    async def names(self) -> list[str]:
        with self._guard():
            names = await self._r.smembers(self._keys.POOL_NAMES)
        return sorted(names)

    async def stats(self, name: str) -> PoolStats:
        await self.prune(name)
        total, avail, claimed, soon = await self._pool_op(name, "stats", EXPIRING_SOON_SECONDS)
        return PoolStats(
            name=name,
            total=int(total),
            available=int(avail),
            claimed=int(claimed),
            expiring_soon=int(soon),
        )

    async def drop(self, name: str) -> int:
        total = 0
        while True:
            deleted, left = await self._pool_op(name, "drop", POOL_CHUNK)
            total += int(deleted)
            if int(left) == 0:
                return total
