"""Routes over pools: list with sizes, items, drop.

A pool *exists* when a catalogued automation declares it (``Pools``) or it holds
unexpired items. The second half is read through ``pool_stats``, which counts
unexpired items alike on every backend (``pool_names`` may still list a pool whose
items all expired but were not pruned yet on one backend and not on another).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Query

from fleet.backends.base import Backend
from fleet.core.records import PoolStats
from fleet.master.http.auth import Principal, admin_access, read_access
from fleet.master.http.models import PoolName, error_responses
from fleet.master.services.catalog import declared_pools, did_you_mean
from fleet.master.state import backend_dependency

router = APIRouter(tags=["pools"], responses=error_responses(401, 403, 404, 413, 503))


async def unknown_pool(backend: Backend, name: str) -> HTTPException:
    """The 404 of a pool nobody declares and that holds nothing, naming the closest
    pools that exist."""
    known = set(await backend.pool_names()) | declared_pools(await backend.catalog_all())
    hint = did_you_mean(name, known)
    return HTTPException(
        404, detail=f"unknown pool {name!r}: no automation declares it and it holds no items{hint}"
    )


async def existing_pools(backend: Backend) -> list[PoolStats]:
    """Stats of every existing pool (declared, or holding unexpired items), by name."""
    declared = declared_pools(await backend.catalog_all())
    found = []
    for name in sorted(declared | set(await backend.pool_names())):
        stats = await backend.pool_stats(name)
        if stats.total or name in declared:
            found.append(stats)
    return found


@router.get("/pools", summary="Pools with sizes")
async def pools(
    _: Any = Depends(read_access),
    backend: Backend = Depends(backend_dependency),
) -> list[dict[str, Any]]:
    """Every pool an automation declares or that holds items: total, available,
    claimed, expiring soon (zeros for a declared pool that is empty)."""
    return [stats.to_dict() for stats in await existing_pools(backend)]


@router.get("/pools/{name}", summary="One pool and its items")
async def pool_items(
    name: PoolName,
    n: int = Query(50, ge=1, le=1_000),
    principal: Principal = Depends(read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """The pool's counts and up to ``n`` available items, freshest first (zeros and
    no items for a declared pool that is empty). Payloads (often credentials or
    cookies) are shown to the admin token only. 404 for a pool that no automation
    declares and that holds no items."""
    stats = await backend.pool_stats(name)
    if stats.total == 0 and name not in declared_pools(await backend.catalog_all()):
        raise await unknown_pool(backend, name)
    items = []
    for item in await backend.pool_list(name, n=n):
        shown = item.to_dict()
        if not principal.is_admin:
            shown.pop("payload", None)
        items.append(shown)
    return {**stats.to_dict(), "items": items}


@router.delete("/pools/{name}", summary="Drop a pool and its claims")
async def drop_pool(
    name: PoolName,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Delete every item and claim of the pool; 404 for a pool that no automation
    declares and that holds nothing (as ``GET``)."""
    known = name in await backend.pool_names() or name in declared_pools(
        await backend.catalog_all()
    )
    if not known:
        raise await unknown_pool(backend, name)
    return {"dropped": await backend.pool_drop(name)}
