"""``GET /api/v1/automations/{type}/costs``: what a type spent (services/costs.py)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query

from fleet.backends.base import Backend
from fleet.master.http.answers import CostsOut
from fleet.master.http.auth import type_read_access
from fleet.master.http.models import TypeName, error_responses
from fleet.master.services import costs
from fleet.master.state import backend_dependency

router = APIRouter(tags=["costs"], responses=error_responses(401, 403, 404, 503))


@router.get(
    "/automations/{automation_type}/costs",
    response_model=CostsOut,
    summary="What a type spent",
)
async def type_costs(
    automation_type: TypeName,
    window: costs.Window = Query("24h", description="The hours shown: 24h, 7d or 30d."),
    after: str | None = Query(None, max_length=253, description="The `next` of the last page."),
    limit: int = Query(50, ge=1, le=costs.MAX_DOMAINS, description="Domains a page."),
    _: Any = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """The type's meters (requests, bytes by tier, solves, browser- and run-seconds, its
    own units, ``spend``) in all, by hour over the window, and by domain (a page)."""
    return await costs.type_costs(backend, automation_type, window=window, after=after, limit=limit)
