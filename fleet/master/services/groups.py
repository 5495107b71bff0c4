"""A type's task groups as the REST API serves them.

A group's answer carries both its own settings (``settings``, null where the type's
value applies) and the effective limits (``concurrency``, ``rate``, ``paused``): the
type's ``group_concurrency``/``group_rate`` overridden field by field.
"""

from __future__ import annotations

from typing import Any

from fleet.backends.base import Backend
from fleet.core.config import merge_config
from fleet.core.flow import GroupInfo, GroupLimits, GroupSettings, check_group
from fleet.master.services.catalog import require_batch_entry
from fleet.master.services.validation import schema_defaults

#: The type's group limits: ``(concurrency, rate)``.
TypeLimits = tuple[int | None, str | None]


async def type_limits(backend: Backend, automation_type: str) -> TypeLimits:
    """The type's ``group_concurrency`` and ``group_rate`` as every reserve reads them
    (stored in the backend); before any was stored, its config over its schema's
    defaults. Also answers 404/409 for a type without a queue."""
    entry = await require_batch_entry(backend, automation_type)
    limits, gen = await backend.groups.defaults(automation_type)
    if gen < 0:
        schema = entry.get("config") or {}
        config = merge_config(schema_defaults(schema), await backend.configs.get(automation_type))
        limits = GroupLimits.of_config(config)
    return limits.concurrency, limits.rate


def group_answer(info: GroupInfo, limits: TypeLimits) -> dict[str, Any]:
    """One group as every answer shows it: its counts, effective limits, own settings."""
    own = info.settings
    concurrency, rate = limits
    return {
        "group": info.name,
        "pending": info.pending,
        "running": info.running,
        "concurrency": own.concurrency if own and own.concurrency is not None else concurrency,
        "rate": own.rate if own and own.rate is not None else rate,
        "paused": bool(own and own.paused),
        "throttled_until": info.throttled_until,
        "settings": None if own is None else own.to_dict(),
    }


async def group_page(
    backend: Backend, automation_type: str, after: str | None, limit: int
) -> dict[str, Any]:
    """``{"groups": [...], "next": cursor or null, "defaults": the type's limits}``."""
    limits = await type_limits(backend, automation_type)
    page = await backend.groups.page(automation_type, after=after, limit=limit)
    return {
        "groups": [group_answer(info, limits) for info in page.groups],
        "next": page.next,
        "defaults": {"concurrency": limits[0], "rate": limits[1]},
    }


async def one_group(backend: Backend, automation_type: str, group: str) -> dict[str, Any]:
    """One group (any name: zeros and the type's limits for one never used)."""
    check_group(group)
    limits = await type_limits(backend, automation_type)
    return group_answer(await backend.groups.info(automation_type, group), limits)


async def set_group(
    backend: Backend,
    automation_type: str,
    group: str,
    *,
    concurrency: int | None,
    rate: str | None,
    paused: bool,
) -> dict[str, Any]:
    """Replace the group's own settings (effective at the next reserve); the group."""
    check_group(group)
    limits = await type_limits(backend, automation_type)
    settings = GroupSettings(concurrency=concurrency, rate=rate, paused=paused)
    await backend.groups.set(automation_type, group, settings)
    return group_answer(await backend.groups.info(automation_type, group), limits)


async def reset_group(backend: Backend, automation_type: str, group: str) -> dict[str, Any]:
    """Drop the group's own settings and any throttle in force; the group."""
    check_group(group)
    limits = await type_limits(backend, automation_type)
    await backend.groups.reset(automation_type, group)
    return group_answer(await backend.groups.info(automation_type, group), limits)
