"""Routes over a type's schedules: list, create, inspect, change, pause, run now, delete.

A schedule's answer is its stored record (``ScheduleRecord.to_dict()``: the
definition, ``next_run``, ``last_run``, ``last_task_id``) with ``declared`` as a flag:
true for a schedule declared on the automation class (``Schedules = [...]``), false for
one created here. A stored record this Fleet cannot read is listed as
``{"id", "unreadable": true, "raw", "error"}``; reading, changing or running it
answers 409, deleting it works (never a 500).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, Strict, StrictBool, StrictInt
from pydantic.json_schema import SkipJsonSchema

from fleet.backends.base import Backend
from fleet.master.http.answers import ScheduleDeleted, ScheduleOut, SchedulePage, ScheduleRun
from fleet.master.http.auth import admin_access, type_read_access
from fleet.master.http.models import ErrorBody, TypeName, error_responses
from fleet.master.services.schedules import MAX_PAGE, Schedules, answer
from fleet.master.state import backend_dependency, master_state

CONFLICT: dict[int | str, dict[str, Any]] = {
    409: {
        "model": ErrorBody,
        "description": (
            "The type has no task queue; or the schedule id exists already (create), "
            "or its stored record cannot be read"
        ),
    }
}
router = APIRouter(
    tags=["schedules"], responses={**error_responses(401, 403, 404, 413, 503), **CONFLICT}
)

ScheduleId = Annotated[
    str, Path(min_length=1, max_length=200, description="The schedule's id within the type.")
]

_CRON = "A cron expression (5 fields, or 6 with seconds first), in `timezone`."
_EVERY = "Or a fixed period in seconds (at least 1); ticks align to multiples of it."
_TZ = "IANA time zone of `cron` (e.g. Europe/Berlin)."
_PAYLOAD = "The task payload (JSON), validated against the type's TaskPayload."
_MISFIRE = "'once': one catch-up run after an outage; 'skip': none."
_JITTER = "Fire each tick up to this many seconds later, to spread load."


#: A JSON number, never a string or a boolean (``"10"`` and ``true`` are refused, not
#: coerced: a typo must not become a setting).
StrictNumber = Annotated[float, Strict()]


class ScheduleBody(BaseModel):
    """A new schedule: exactly one of ``cron`` and ``every_seconds``."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    id: str = Field(min_length=1, max_length=100, description="Unique within the type.")
    cron: str | None = Field(default=None, max_length=200, description=_CRON)
    every_seconds: StrictNumber | None = Field(default=None, description=_EVERY)
    timezone: str = Field(default="UTC", max_length=100, description=_TZ)
    payload: Any = Field(description=_PAYLOAD)
    priority: StrictInt = Field(default=0, description="`>0` high tier, `0` normal, `<0` low.")
    group: str | None = Field(default=None, description="The tasks' flow-control group.")
    max_attempts: StrictInt | None = Field(default=None, description="Per-task attempts (1..1000).")
    enabled: StrictBool = Field(default=True, description="False: no tick fires until resumed.")
    misfire: Literal["once", "skip"] = Field(default="once", description=_MISFIRE)
    jitter_seconds: StrictNumber = Field(default=0.0, description=_JITTER)


class SchedulePatch(BaseModel):
    """The fields to change; the others keep their stored value. ``cron`` and
    ``every_seconds`` switch: giving one clears the other."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    cron: str | None = Field(default=None, max_length=200, description=_CRON)
    every_seconds: StrictNumber | None = Field(default=None, description=_EVERY)
    timezone: str | None = Field(default=None, max_length=100, description=_TZ + " Null: UTC.")
    payload: Any = Field(default=None, description=_PAYLOAD)
    priority: StrictInt | SkipJsonSchema[None] = Field(
        default=None, description="`>0` high tier, `0` normal, `<0` low."
    )
    group: str | None = Field(default=None, description="The tasks' flow-control group.")
    max_attempts: StrictInt | None = Field(default=None, description="Per-task attempts (1..1000).")
    enabled: StrictBool | SkipJsonSchema[None] = Field(
        default=None, description="False pauses, true resumes."
    )
    misfire: Literal["once", "skip"] | SkipJsonSchema[None] = Field(
        default=None, description=_MISFIRE
    )
    jitter_seconds: StrictNumber | SkipJsonSchema[None] = Field(default=None, description=_JITTER)


def _schedules(request: Request, backend: Backend, automation_type: str) -> Schedules:
    return Schedules(backend, master_state(request).entries, automation_type)


@router.get(
    "/automations/{automation_type}/schedules",
    response_model=SchedulePage,
    summary="List a type's schedules",
)
async def list_schedules(
    automation_type: TypeName,
    request: Request,
    after: str | None = Query(
        None, max_length=200, description="The `next` cursor of the previous page."
    ),
    limit: int = Query(100, ge=1, le=MAX_PAGE),
    _: Any = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """The type's schedules by id, ``limit`` a page (and at most ~4 MiB of them):
    ``{"schedules": [...], "next": cursor or null}``, each with its ``next_run``,
    ``last_run``, ``last_task_id`` and ``last_error``; one whose stored record cannot
    be read as ``{"id", "unreadable": true, "raw", "error"}``. A type without a task
    queue (a continuous automation) has none to fire: its list (empty) comes with a
    ``note`` saying so."""
    return await _schedules(request, backend, automation_type).page(after, limit)


@router.post(
    "/automations/{automation_type}/schedules",
    response_model=ScheduleOut,
    status_code=201,
    summary="Create a schedule",
    responses=error_responses(400),
)
async def create_schedule(
    automation_type: TypeName,
    body: ScheduleBody,
    request: Request,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> JSONResponse:
    """Validate the definition (and the payload against the type's ``TaskPayload``)
    and store it; its first tick is the first one after now. 409 if the id exists
    (PATCH changes a schedule)."""
    cap = master_state(request).settings.max_schedules
    schedules = _schedules(request, backend, automation_type)
    record = await schedules.create(body.id, body.model_dump(), cap)
    return JSONResponse(answer(record), status_code=201)


@router.get(
    "/automations/{automation_type}/schedules/{schedule_id}",
    response_model=ScheduleOut,
    summary="One schedule",
)
async def get_schedule(
    automation_type: TypeName,
    schedule_id: ScheduleId,
    request: Request,
    _: Any = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """One schedule: its definition, next run and last run."""
    return answer(await _schedules(request, backend, automation_type).get(schedule_id))


@router.patch(
    "/automations/{automation_type}/schedules/{schedule_id}",
    response_model=ScheduleOut,
    summary="Change, pause or resume a schedule",
    responses=error_responses(400),
)
async def patch_schedule(
    automation_type: TypeName,
    schedule_id: ScheduleId,
    body: SchedulePatch,
    request: Request,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Change the fields given, re-validated as a whole: ``{"enabled": false}``
    pauses, ``{"enabled": true}`` resumes (from the next tick after now, no
    catch-up). A new timing also moves the next run to its first tick after now."""
    given = body.model_dump(include=body.model_fields_set)
    return answer(await _schedules(request, backend, automation_type).change(schedule_id, given))


@router.delete(
    "/automations/{automation_type}/schedules/{schedule_id}",
    response_model=ScheduleDeleted,
    summary="Delete a schedule",
)
async def delete_schedule(
    automation_type: TypeName,
    schedule_id: ScheduleId,
    request: Request,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Delete the schedule (an unreadable one too); its tasks already queued stay.
    A schedule declared on the class comes back when a process with the plugin
    starts."""
    await _schedules(request, backend, automation_type).delete(schedule_id)
    return {"deleted": True}


@router.post(
    "/automations/{automation_type}/schedules/{schedule_id}/run",
    response_model=ScheduleRun,
    status_code=202,
    summary="Enqueue one run of a schedule now",
)
async def run_schedule(
    automation_type: TypeName,
    schedule_id: ScheduleId,
    request: Request,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> JSONResponse:
    """Enqueue one task with the schedule's payload now, whether it is paused or
    not, outside its ticks (its next run stays); answers ``{"task_id"}``, recorded
    as the schedule's last run."""
    task_id = await _schedules(request, backend, automation_type).run(schedule_id)
    return JSONResponse({"task_id": task_id}, status_code=202)
