"""Routes over a type's task groups: list, inspect, configure, pause, reset (what a
group's answer holds: services/groups.py)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, field_validator

from fleet.backends.base import Backend
from fleet.core.flow import MAX_GROUP_LEN, parse_rate
from fleet.master.http.answers import GroupOut, GroupPage
from fleet.master.http.auth import admin_access, type_read_access
from fleet.master.http.models import TypeName, error_responses
from fleet.master.services import groups
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


@router.get(
    "/automations/{automation_type}/groups",
    response_model=GroupPage,
    summary="List a type's groups",
)
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
    return await groups.group_page(backend, automation_type, after, limit)


@router.get(
    "/automations/{automation_type}/groups/{group:path}",
    response_model=GroupOut,
    summary="One group",
)
async def get_group(
    automation_type: TypeName,
    group: GroupName,
    _: Any = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """One group; a group with no task and no settings answers zeros and the type's
    limits (any name may become a group by the next submit)."""
    return await groups.one_group(backend, automation_type, group)


@router.put(
    "/automations/{automation_type}/groups/{group:path}",
    response_model=GroupOut,
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
    return await groups.set_group(
        backend,
        automation_type,
        group,
        concurrency=body.concurrency,
        rate=body.rate,
        paused=body.paused,
    )


@router.delete(
    "/automations/{automation_type}/groups/{group:path}",
    response_model=GroupOut,
    summary="Back to the type's limits",
)
async def reset_group(
    automation_type: TypeName,
    group: GroupName,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Drop the group's own settings and any throttle in force."""
    return await groups.reset_group(backend, automation_type, group)
