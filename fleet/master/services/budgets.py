"""A type's daily budget from the master's side (docs/costs.md): the day's meters, the
hold it may be under, and the hold's end when a config write raises the budget."""

from __future__ import annotations

from typing import Any

from fleet.backends.base import Backend
from fleet.core.budgets import day_scopes, over, summed
from fleet.core.clock import now


async def day_meters(backend: Backend, automation_type: str) -> dict[str, float]:
    """The type's meters over the current UTC day (its hour scopes, summed)."""
    scopes = day_scopes(automation_type, now())
    found = await backend.meters.get(scopes)
    return summed([found.get(s, {}) for s in scopes])


async def recheck(backend: Backend, automation_type: str, budget: Any) -> bool:
    """After a config write: a type held by its daily budget whose new budget (None:
    none) its day's meters no longer reach is released at once; True if it was."""
    if await backend.meters.held(automation_type) is None:
        return False
    caps = budget if isinstance(budget, dict) and budget else None
    if caps is not None and over(caps, await day_meters(backend, automation_type)) is not None:
        return False
    return await backend.meters.unhold(automation_type)
