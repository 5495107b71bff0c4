"""Routes over a type's schedules: list, create, inspect, change, pause, run now, delete.

A schedule's answer is its stored record (``ScheduleRecord.to_dict()``: the
definition, ``next_run``, ``last_run``, ``last_task_id``) with ``declared`` as a flag:
true for a schedule declared on the automation class (``Schedules = [...]``), false for
one created here. A stored record this Fleet cannot read is listed as
``{"id", "unreadable": true, "raw", "error"}``; reading, changing or running it
answers 409, deleting it works (never a 500).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, Strict, StrictBool, StrictInt
from pydantic.json_schema import SkipJsonSchema

from fleet.backends.base import Backend
from fleet.core.capabilities.schedules import UnreadableSchedule
from fleet.core.records import now
from fleet.core.schedule import (
    DEFINITION,
    ScheduleRecord,
    check_definition,
    check_schedule_id,
    new_record,
    next_tick,
)
from fleet.master.http.auth import admin_access, type_read_access
from fleet.master.http.models import ErrorBody, TypeName, error_responses
from fleet.master.services.catalog import require_batch_entry, require_readable_entry
from fleet.master.services.validation import ErrorList, InvalidInput, non_finite_errors
from fleet.master.state import backend_dependency, master_state
from fleet.scheduler import run_now

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
#: Fields whose change moves the next run to the new timing's next tick.
TIMING = ("cron", "every_seconds", "timezone")
#: Attempts of a PATCH or a run against the firer moving the same record meanwhile.
SWAP_TRIES = 5

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


def _answer(record: ScheduleRecord) -> dict[str, Any]:
    out = record.to_dict()
    out["declared"] = record.declared is not None
    return out


def _unreadable(item: UnreadableSchedule) -> dict[str, Any]:
    return {"id": item.id, "unreadable": True, "raw": item.raw, "error": item.error}


async def _payload_errors(
    request: Request, backend: Backend, automation_type: str, payload: Any
) -> ErrorList:
    """The payload's errors against the type's schema, as a task submit finds them."""
    loc = ("body", "payload")
    # Lone surrogates never get this far: the JSON guard refuses them at ingress.
    errors = non_finite_errors(payload, loc)
    if errors:
        return errors
    checker = await master_state(request).entries.checker(backend, automation_type)
    return checker.errors(payload, loc)


async def _record(backend: Backend, automation_type: str, schedule_id: str) -> ScheduleRecord:
    """The stored schedule; 404 if absent, 409 if its record cannot be read."""
    try:
        record = await backend.schedule_get(automation_type, schedule_id)
    except ValueError as exc:
        raise HTTPException(
            409, detail=f"{exc}; it never fires: DELETE it, then create it again"
        ) from exc
    if record is None:
        raise HTTPException(404, detail=f"no schedule {schedule_id!r} in {automation_type!r}")
    return record


def _merge(current: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """``given`` (a PATCH) over ``current``; a non-null cron clears every_seconds and
    the other way round, unless the PATCH gives both."""
    merged = {**current, **given}
    if given.get("cron") is not None and "every_seconds" not in given:
        merged["every_seconds"] = None
    if given.get("every_seconds") is not None and "cron" not in given:
        merged["cron"] = None
    return merged


#: Most schedules one page lists, and the most bytes of schedules it holds (a
#: page stops early, after at least one, once its payloads pass the budget).
MAX_PAGE = 1000
PAGE_BYTES = 4 << 20


@router.get("/automations/{automation_type}/schedules", summary="List a type's schedules")
async def list_schedules(
    automation_type: TypeName,
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
    entry = await require_readable_entry(backend, automation_type)
    items = await backend.schedule_list(automation_type)
    page: list[dict[str, Any]] = []
    size = 0
    cursor = None
    for item in items:  # ordered by id
        if after is not None and item.id <= after:
            continue
        if len(page) == limit or (page and size > PAGE_BYTES):
            cursor = page[-1]["id"]
            break
        shown = _unreadable(item) if isinstance(item, UnreadableSchedule) else _answer(item)
        size += len(json.dumps(shown, default=str))
        page.append(shown)
    answer: dict[str, Any] = {"schedules": page, "next": cursor}
    if not entry.get("queue"):
        continuous = "continuous" in str(entry.get("kind", "")).lower()
        what = "a continuous automation" if continuous else "an automation without a task queue"
        answer["note"] = (
            f"{automation_type} is {what}: it runs without tasks, so no schedule can fire it"
        )
    return answer


@router.post(
    "/automations/{automation_type}/schedules",
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
    await require_batch_entry(backend, automation_type)
    check_schedule_id(body.id)
    definition = check_definition(body.model_dump(include=set(DEFINITION)))
    errors = await _payload_errors(request, backend, automation_type, definition["payload"])
    if errors:
        raise InvalidInput(errors)
    if await backend.schedule_get_raw(automation_type, body.id) is not None:
        raise HTTPException(
            409, detail=f"schedule {body.id!r} exists already in {automation_type!r}: PATCH it"
        )
    cap = master_state(request).settings.max_schedules
    if len(await backend.schedule_list_raw(automation_type)) >= cap:
        raise HTTPException(
            409,
            detail=f"{automation_type!r} has {cap} schedules, the most FLEET_MAX_SCHEDULES "
            "allows: delete one first, or raise the setting",
        )
    record = new_record(automation_type, body.id, definition, now=now())
    await backend.schedule_put(record)
    return JSONResponse(_answer(record), status_code=201)


@router.get("/automations/{automation_type}/schedules/{schedule_id}", summary="One schedule")
async def get_schedule(
    automation_type: TypeName,
    schedule_id: ScheduleId,
    _: Any = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """One schedule: its definition, next run and last run."""
    await require_batch_entry(backend, automation_type)
    return _answer(await _record(backend, automation_type, schedule_id))


@router.patch(
    "/automations/{automation_type}/schedules/{schedule_id}",
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
    await require_batch_entry(backend, automation_type)
    given = body.model_dump(include=body.model_fields_set)
    for _attempt in range(SWAP_TRIES):
        current = await _record(backend, automation_type, schedule_id)
        definition = check_definition(_merge(current.definition, given))
        if "payload" in given or definition["enabled"]:
            # Pausing always works; resuming a schedule whose payload no longer fits
            # the type's TaskPayload is refused (its ticks would enqueue bad tasks).
            errors = await _payload_errors(request, backend, automation_type, definition["payload"])
            if errors:
                raise InvalidInput(errors)
        t = now()
        retimed = any(current.definition.get(k) != definition.get(k) for k in TIMING)
        resumed = definition["enabled"] and not current.enabled
        updated = current.evolve(
            definition=definition,
            next_run=next_tick(definition, t) if retimed or resumed else current.next_run,
            updated_at=t,
        )
        if await backend.schedule_swap(current, updated):
            return _answer(updated)
    raise HTTPException(409, detail=f"schedule {schedule_id!r} kept changing meanwhile; try again")


@router.delete(
    "/automations/{automation_type}/schedules/{schedule_id}", summary="Delete a schedule"
)
async def delete_schedule(
    automation_type: TypeName,
    schedule_id: ScheduleId,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Delete the schedule (an unreadable one too); its tasks already queued stay.
    A schedule declared on the class comes back when a process with the plugin
    starts."""
    await require_batch_entry(backend, automation_type)
    if not await backend.schedule_delete(automation_type, schedule_id):
        raise HTTPException(404, detail=f"no schedule {schedule_id!r} in {automation_type!r}")
    return {"deleted": True}


@router.post(
    "/automations/{automation_type}/schedules/{schedule_id}/run",
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
    await require_batch_entry(backend, automation_type)
    record = await _record(backend, automation_type, schedule_id)
    errors = await _payload_errors(request, backend, automation_type, record.definition["payload"])
    if errors:
        where = ".".join(str(p) for p in errors[0]["loc"][1:])
        raise HTTPException(
            409,
            detail=(
                f"the schedule's payload no longer fits the type's TaskPayload "
                f"({where}: {errors[0]['msg']}); PATCH its payload"
            ),
        )
    task_id = await run_now(backend, record)
    return JSONResponse({"task_id": task_id}, status_code=202)
