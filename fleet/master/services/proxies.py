"""The health of every proxy the fleet's slots use, as ``GET /api/v1/proxies`` shows it.

Proxies are listed by key (:func:`fleet.core.proxy.proxy_key`: scheme, host, port and
a digest of the user name), so no answer holds a user name or a password; the reason
of the last bad report is masked again on the way out.
"""

from __future__ import annotations

from typing import Any

from fleet.core.capabilities.proxies import ProxyHealth
from fleet.core.redact import mask_credentials


async def proxy_health(backend: ProxyHealth, limit: int) -> dict[str, Any]:
    """``{"proxies": [...], "cooling": n, "in_use": n}`` over up to ``limit`` proxies."""
    found = await backend.listing(limit=limit)
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
