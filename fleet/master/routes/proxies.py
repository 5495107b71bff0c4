"""``GET /api/v1/proxies``: the health of every proxy the fleet's slots use.

Proxies are listed by key (:func:`fleet.core.proxy.proxy_key`: scheme, host, port and
a digest of the user name), so no answer holds a user name or a password; the reason
of the last bad report is masked again on the way out.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query

from fleet.backends.base import Backend
from fleet.core.redact import mask_credentials
from fleet.master.http.auth import read_access
from fleet.master.http.models import error_responses
from fleet.master.state import backend_dependency

router = APIRouter(tags=["proxies"], responses=error_responses(401, 403, 503))

#: Most proxies one answer lists.
MAX_PROXIES = 1000


@router.get("/proxies", summary="Proxy health, fleet-wide")
async def list_proxies(
    limit: int = Query(MAX_PROXIES, ge=1, le=MAX_PROXIES),
    _: Any = Depends(read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Every proxy known to the backend (taken or reported in the last hour), by key:
    uses, ok and bad reports, score (bad reports in a row), whether it is cooling down
    and until when, and how many slots use it now."""
    found = await backend.proxy_list(limit=limit)
    proxies = []
    for info in found:
        item = info.to_dict()
        if info.last_reason is not None:
            item["last_reason"] = mask_credentials(info.last_reason)
        proxies.append(item)
    return {
        "proxies": proxies,
        "cooling": sum(1 for p in found if p.cooling_until is not None),
        "in_use": sum(p.in_use for p in found),
    }
