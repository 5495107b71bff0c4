"""Routes over pools: list with sizes, items, drop (what a pool is: services/pools.py)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query

from fleet.backends.base import Backend
from fleet.master.http.answers import PoolDetail, PoolDropped, PoolOut
from fleet.master.http.auth import Principal, admin_access, read_access
from fleet.master.http.models import PoolName, error_responses
from fleet.master.services import pools as pool_service
from fleet.master.state import backend_dependency

router = APIRouter(tags=["pools"], responses=error_responses(401, 403, 404, 413, 503))


@router.get("/pools", response_model=list[PoolOut], summary="Pools with sizes")
async def pools(
    _: Any = Depends(read_access),
    backend: Backend = Depends(backend_dependency),
) -> list[dict[str, Any]]:
    """Every pool an automation declares or that holds items: total, available,
    claimed, expiring soon (zeros for a declared pool that is empty)."""
    return [stats.to_dict() for stats in await pool_service.existing_pools(backend)]


@router.get("/pools/{name}", response_model=PoolDetail, summary="One pool and its items")
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
    return await pool_service.pool_detail(backend, name, n, payloads=principal.is_admin)


@router.delete("/pools/{name}", response_model=PoolDropped, summary="Drop a pool and its claims")
async def drop_pool(
    name: PoolName,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Delete every item and claim of the pool; 404 for a pool that no automation
    declares and that holds nothing (as ``GET``)."""
    return {"dropped": await pool_service.drop(backend, name)}
