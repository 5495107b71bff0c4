"""Routes over pools: list with sizes, items, drop."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Query

from fleet.backends.base import Backend
from fleet.master.auth import Principal, admin_access, read_access
from fleet.master.models import PoolName, error_responses
from fleet.master.state import backend_dependency

router = APIRouter(tags=["pools"], responses=error_responses(401, 403, 404, 413, 503))


@router.get("/pools", summary="Pools with sizes")
async def pools(
    _: Any = Depends(read_access),
    backend: Backend = Depends(backend_dependency),
) -> list[dict[str, Any]]:
    """Every pool holding items: total, available, claimed, expiring soon."""
    return [(await backend.pool_stats(name)).to_dict() for name in await backend.pool_names()]


@router.get("/pools/{name}", summary="One pool and its items")
async def pool_items(
    name: PoolName,
    n: int = Query(50, ge=1, le=1_000),
    principal: Principal = Depends(read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """The pool's counts and up to ``n`` available items, freshest first. Payloads
    (often credentials or cookies) are shown to the admin token only."""
    stats = await backend.pool_stats(name)
    if stats.total == 0 and name not in await backend.pool_names():
        raise HTTPException(404, detail=f"pool {name!r} holds no items")
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
    """Delete every item and claim of the pool."""
    return {"dropped": await backend.pool_drop(name)}
