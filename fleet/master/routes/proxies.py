"""``GET /api/v1/proxies``: the health of every proxy the fleet's slots use
(services/proxies.py: listed by key, reasons masked)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query

from fleet.backends.base import Backend
from fleet.master.http.answers import ProxiesOut
from fleet.master.http.auth import read_access
from fleet.master.http.models import error_responses
from fleet.master.services.proxies import proxy_health
from fleet.master.state import backend_dependency

router = APIRouter(tags=["proxies"], responses=error_responses(401, 403, 503))

#: Most proxies one answer lists.
MAX_PROXIES = 1000


@router.get("/proxies", response_model=ProxiesOut, summary="Proxy health, fleet-wide")
async def list_proxies(
    limit: int = Query(MAX_PROXIES, ge=1, le=MAX_PROXIES),
    _: Any = Depends(read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Every proxy known to the backend (taken or reported in the last hour), by key:
    uses, ok and bad reports, score (bad reports in a row), whether it is cooling down
    and until when, and how many slots use it now."""
    return await proxy_health(backend.proxies, limit)
