"""What a type spent (docs/costs.md): its meters in all, by hour over a window, and
by domain (a page), read from the backend's ``meters`` in one read each."""

from __future__ import annotations

from typing import Any, Literal

from fleet.backends.base import Backend
from fleet.core import clock
from fleet.core.meters import HOUR, domain_scope, hour_scope, hour_start, type_scope
from fleet.master.services import budgets
from fleet.master.services.catalog import require_entry

#: Hours each window shows.
WINDOW_HOURS = {"24h": 24, "7d": 7 * 24, "30d": 30 * 24}
Window = Literal["24h", "7d", "30d"]
#: Most domains one page lists.
MAX_DOMAINS = 500


async def type_costs(
    backend: Backend,
    automation_type: str,
    *,
    window: Window = "24h",
    after: str | None = None,
    limit: int = 50,
) -> dict[str, Any]:
    """A type's meters: ``meters`` in all, ``hours`` (oldest first, every hour of the
    window, empty ones ``{}``), ``domains`` (a page by name, ``next`` its ``after``).

    Raises:
        NotFound: 404 for an unknown type.
    """
    await require_entry(backend, automation_type)
    last = hour_start(clock.now())
    starts = [last - i * HOUR for i in range(WINDOW_HOURS[window] - 1, -1, -1)]
    hours = [hour_scope(automation_type, s) for s in starts]
    prefix = domain_scope(automation_type, "")
    after_scope = None if after is None else prefix + after
    names = await backend.meters.scopes(prefix, after=after_scope, limit=limit + 1)
    more = len(names) > limit
    names = names[:limit]
    got = await backend.meters.get([type_scope(automation_type), *hours, *names])
    by_hour = [{"start": s, "meters": got.get(h, {})} for s, h in zip(starts, hours, strict=True)]
    hold = await backend.meters.held(automation_type)
    return {
        "type": automation_type,
        "window": window,
        "meters": got.get(type_scope(automation_type), {}),
        "hours": by_hour,
        "domains": [{"domain": n[len(prefix) :], "meters": got.get(n, {})} for n in names],
        "next": names[-1][len(prefix) :] if more and names else None,
        "today": await budgets.day_meters(backend, automation_type),
        "held": None if hold is None else hold.to_dict(),
    }
