"""Pools: shared items with tags, TTLs and exclusive claims.

**The order of a pool**, the same on every backend: items sort by their *place*,
then by id. An item that expires has its expiry as its place; one that never expires
has :data:`NEVER` + its creation time, so it sorts after every item that expires, the
newest last. ``freshest`` claims and ``items`` list from the greatest (place, id),
``oldest`` claims the least; ``random`` takes any. Two items with the same place (put
at the same instant with the same TTL) are told apart by their ids. A put of an
existing id makes the item anew (its ``created_at`` and place are the new put's): only
a claim on it is kept.

**Tag values** are compared as their canonical JSON (:func:`tag_text`: object keys
sorted), so ``{"a": 1, "b": 2}`` and ``{"b": 2, "a": 1}`` are one value everywhere.
"""

from __future__ import annotations

import abc
import json
from typing import Any

from fleet.core.records import PoolClaim, PoolItem, PoolStats, PoolStrategy

#: The place of items that never expire starts here (a time no expiry reaches).
NEVER = 1e12


def place_of(expires_at: float | None, created_at: float) -> float:
    """An item's place in its pool's order (see the module's docstring)."""
    return NEVER + created_at if expires_at is None else expires_at


def tag_text(value: Any) -> str:
    """A tag value's canonical JSON: what every backend stores and compares."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class Pools(abc.ABC):
    """Named pools of items that slots claim, release and evict."""

    @abc.abstractmethod
    async def put(
        self,
        name: str,
        payload: Any,
        tags: dict[str, Any],
        *,
        ttl_seconds: float | None = None,
        item_id: str | None = None,
    ) -> str:
        """Insert an item (new id) or replace the item ``item_id`` (an existing
        claim on it is kept). Expires at now + ttl if given. Prunes expired
        items. Returns the item id."""

    @abc.abstractmethod
    async def claim(
        self,
        name: str,
        *,
        where: dict[str, Any] | None = None,
        hold_seconds: float = 60.0,
        strategy: PoolStrategy = "freshest",
    ) -> PoolClaim | None:
        """Claim one unclaimed, unexpired item whose tags equal every ``where``
        field: the one expiring last (``freshest``; never-expiring items count as
        freshest), expiring first (``oldest``) or any (``random``). The claim is an
        exclusive lease until now + ``hold_seconds`` with a new token. None if no
        item matches. Cost must not grow with the pool's size."""

    @abc.abstractmethod
    async def release(self, name: str, item_id: str, token: str) -> bool:
        """End a claim early if ``token`` still holds it; False and no change else."""

    @abc.abstractmethod
    async def evict(self, name: str, item_id: str, token: str) -> bool:
        """Remove a claimed item for good if ``token`` still holds it; else False."""

    @abc.abstractmethod
    async def extend(self, name: str, item_id: str, token: str, hold_seconds: float) -> bool:
        """Extend a held claim to now + ``hold_seconds``; False if the token lost it."""

    @abc.abstractmethod
    async def items(
        self, name: str, *, where: dict[str, Any] | None = None, n: int = 50
    ) -> list[PoolItem]:
        """Up to ``n`` unclaimed, unexpired items matching ``where``, freshest first."""

    @abc.abstractmethod
    async def size(self, name: str, *, where: dict[str, Any] | None = None) -> int:
        """Count of unclaimed, unexpired items matching ``where``."""

    @abc.abstractmethod
    async def remove(self, name: str, item_id: str) -> bool:
        """Remove an item whatever its claim; True if it existed (an expired item
        does not)."""

    @abc.abstractmethod
    async def prune(self, name: str) -> int:
        """Remove expired items (and stale claim records); returns how many items."""

    @abc.abstractmethod
    async def names(self) -> list[str]:
        """Names of pools that hold at least one item, sorted."""

    @abc.abstractmethod
    async def stats(self, name: str) -> PoolStats:
        """Counts of one pool (zeros for an unknown pool)."""

    @abc.abstractmethod
    async def drop(self, name: str) -> int:
        """Delete a pool, its indexes and claims; returns how many items it had."""
