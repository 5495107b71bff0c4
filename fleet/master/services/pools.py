"""Pools as the REST API serves them.

A pool *exists* when a catalogued automation declares it (``Pools``) or it holds
unexpired items. The second half is read through ``pool_stats``, which counts
unexpired items alike on every backend (``pool_names`` may still list a pool whose
items all expired but were not pruned yet on one backend and not on another).
"""

from __future__ import annotations

from typing import Any

from fleet.backends.base import Backend
from fleet.core.errors import NotFound
from fleet.core.records import PoolStats
from fleet.master.services.catalog import declared_pools, did_you_mean


async def unknown_pool(backend: Backend, name: str) -> NotFound:
    """The 404 of a pool nobody declares and that holds nothing, naming the closest
    pools that exist."""
    known = set(await backend.pools.names()) | declared_pools(await backend.catalog.all())
    return NotFound(
        f"unknown pool {name!r}: no automation declares it and it holds no items",
        resource="pool",
        key=name,
        hint=did_you_mean(name, known),
    )


async def existing_pools(backend: Backend) -> list[PoolStats]:
    """Stats of every existing pool (declared, or holding unexpired items), by name."""
    declared = declared_pools(await backend.catalog.all())
    found = []
    for name in sorted(declared | set(await backend.pools.names())):
        stats = await backend.pools.stats(name)
        if stats.total or name in declared:
            found.append(stats)
    return found


async def pool_detail(backend: Backend, name: str, n: int, *, payloads: bool) -> dict[str, Any]:
    """The pool's counts and up to ``n`` available items, freshest first; their
    payloads (often credentials or cookies) only when ``payloads``.

    Raises:
        NotFound: 404 for a pool that no automation declares and that holds no items.
    """
    stats = await backend.pools.stats(name)
    if stats.total == 0 and name not in declared_pools(await backend.catalog.all()):
        raise await unknown_pool(backend, name)
    items = []
    for item in await backend.pools.items(name, n=n):
        shown = item.to_dict()
        if not payloads:
            shown.pop("payload", None)
        items.append(shown)
    return {**stats.to_dict(), "items": items}


async def drop(backend: Backend, name: str) -> int:
    """Delete every item and claim of the pool; how many items were dropped.

    Raises:
        NotFound: 404 for a pool that no automation declares and that holds nothing.
    """
    known = name in await backend.pools.names() or name in declared_pools(
        await backend.catalog.all()
    )
    if not known:
        raise await unknown_pool(backend, name)
    return await backend.pools.drop(name)
