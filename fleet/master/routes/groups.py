"""Routes over a type's task groups: list, inspect, configure, pause, reset.

A group's answer carries both its own settings (``settings``, null where the type's
value applies) and the effective limits (``concurrency``, ``rate``, ``paused``): the
type's ``group_concurrency``/``group_rate`` overridden field by field.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, field_validator

from fleet.backends.base import Backend
from fleet.core.config import merge_config
from fleet.core.flow import (
    MAX_GROUP_LEN,
    GroupInfo,
    GroupLimits,
    GroupSettings,
    check_group,
    parse_rate,
)
from fleet.master.http.auth import admin_access, type_read_access
from fleet.master.http.models import TypeName, error_responses
from fleet.master.services.catalog import require_batch_entry
from fleet.master.services.validation import schema_defaults
from fleet.master.state import backend_dependency

router = APIRouter(tags=["groups"], responses=error_responses(401, 403, 404, 409, 413, 503))

GroupName = Annotated[
    str,
    Path(
        min_length=1,
        max_length=MAX_GROUP_LEN,
        description="A group (a domain, an API key's name, a tenant). Slashes are allowed.",
    ),
]

#: Most groups one page lists.
MAX_PAGE = 1000


class GroupBody(BaseModel):
    """A group's own settings; a field left null takes the type's value."""

    model_config = ConfigDict(extra="forbid")

    concurrency: StrictInt | None = Field(default=None, ge=1, le=1_000_000)
    rate: str | None = Field(
        default=None, max_length=40, description="'5/s', '100/m', '1000/h', '20/d' or '3/10s'."
    )
    paused: StrictBool = False

    @field_validator("rate")
    @classmethod
    def _rate(cls, value: str | None) -> str | None:
        return None if value is None else parse_rate(value).text


async def _type_limits(backend: Backend, automation_type: str) -> tuple[int | None, str | None]:
    """The type's ``group_concurrency`` and ``group_rate`` as every reserve reads them
    (stored in the backend); before any was stored, its config over its schema's
    defaults. Also answers 404/409 for a type without a queue."""
    entry = await require_batch_entry(backend, automation_type)
    limits, gen = await backend.group_defaults(automation_type)
    if gen < 0:
        schema = entry.get("config") or {}
        config = merge_config(schema_defaults(schema), await backend.config_get(automation_type))
        limits = GroupLimits.of_config(config)
    return limits.concurrency, limits.rate


def _answer(info: GroupInfo, limits: tuple[int | None, str | None]) -> dict[str, Any]:
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


@router.get("/automations/{automation_type}/groups", summary="List a type's groups")
async def list_groups(
    automation_type: TypeName,
    after: str | None = Query(
        None, max_length=MAX_GROUP_LEN, description="The `next` cursor of the previous page."
    ),
    limit: int = Query(MAX_PAGE, ge=1, le=MAX_PAGE),
    _: Any = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Groups by name, ``limit`` a page: each with pending, running, the effective
    concurrency, rate and pause, and ``throttled_until`` while held. ``next`` is the
    cursor of the next page (null on the last one)."""
    limits = await _type_limits(backend, automation_type)
    page = await backend.group_list(automation_type, after=after, limit=limit)
    return {
        "groups": [_answer(info, limits) for info in page.groups],
        "next": page.next,
        "defaults": {"concurrency": limits[0], "rate": limits[1]},
    }


@router.get("/automations/{automation_type}/groups/{group:path}", summary="One group")
async def get_group(
    automation_type: TypeName,
    group: GroupName,
    _: Any = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """One group; a group with no task and no settings answers zeros and the type's
    limits (any name may become a group by the next submit)."""
    check_group(group)
    limits = await _type_limits(backend, automation_type)
    return _answer(await backend.group_info(automation_type, group), limits)


@router.put(
    "/automations/{automation_type}/groups/{group:path}",
    summary="Set a group's own limits or pause it",
    responses=error_responses(400),
)
async def put_group(
    automation_type: TypeName,
    group: GroupName,
    body: GroupBody,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Replace the group's own settings, effective at the next reserve on every
    worker: ``{"concurrency": 2, "rate": "1/s", "paused": true}``."""
    check_group(group)
    limits = await _type_limits(backend, automation_type)
    settings = GroupSettings(concurrency=body.concurrency, rate=body.rate, paused=body.paused)
    await backend.group_set(automation_type, group, settings)
    return _answer(await backend.group_info(automation_type, group), limits)


@router.delete(
    "/automations/{automation_type}/groups/{group:path}",
    summary="Back to the type's limits",
)
async def reset_group(
    automation_type: TypeName,
    group: GroupName,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Drop the group's own settings and any throttle in force."""
    check_group(group)
    limits = await _type_limits(backend, automation_type)
    await backend.group_reset(automation_type, group)
    return _answer(await backend.group_info(automation_type, group), limits)
