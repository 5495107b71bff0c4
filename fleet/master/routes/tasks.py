"""Routes that submit and inspect tasks: submit, batch, state, cancel, queue depths."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse

from fleet.backends.base import Backend
from fleet.core.results import MAX_WAIT_SECONDS
from fleet.master.http.answers import QueueDepths, TaskCancelled, TaskRecord
from fleet.master.http.auth import Principal, admin_access, submit_access, type_read_access
from fleet.master.http.disconnect import unless_disconnected
from fleet.master.http.models import (
    BatchBody,
    BatchResult,
    SubmitBody,
    SubmitResult,
    TypeName,
    error_responses,
)
from fleet.master.services import tasks
from fleet.master.state import backend_dependency, get_backend, master_state

router = APIRouter(tags=["tasks"], responses=error_responses(401, 403, 404, 409, 413, 503))


def _scoped(principal: Principal) -> frozenset[str] | None:
    """The types of a scoped token (what it may submit into a run); None for admin."""
    return None if principal.is_admin else principal.types


@router.post(
    "/automations/{automation_type}/tasks",
    status_code=202,
    response_model=SubmitResult,
    responses=error_responses(400),
    summary="Submit one task",
)
async def submit(
    automation_type: TypeName,
    body: SubmitBody,
    request: Request,
    principal: Principal = Depends(submit_access),
) -> JSONResponse:
    """Validate the payload against the type's ``TaskPayload`` and enqueue it.

    A live ``idempotency_key`` answers the first task's id with ``queued=false,
    duplicate=true``; so does a ``task_id`` that is already queued or running.
    """
    # The hot path of the API: the backend comes from the app state rather than
    # a second dependency, and the catalog entry from the short-lived cache.
    state = master_state(request)
    backend = get_backend(request)
    checker = await state.entries.checker(backend, automation_type)
    ttl = state.settings.idempotency_ttl_seconds
    parent = request.headers.get("traceparent")
    result = await tasks.submit_one(
        backend, checker, automation_type, body, ttl, parent, scoped=_scoped(principal)
    )
    return JSONResponse(result, status_code=202)


@router.post(
    "/automations/{automation_type}/tasks/batch",
    status_code=202,
    response_model=BatchResult,
    responses=error_responses(400),
    summary="Submit up to 10,000 tasks",
)
async def submit_batch(
    automation_type: TypeName,
    body: BatchBody,
    request: Request,
    principal: Principal = Depends(submit_access),
) -> JSONResponse:
    """Validate each task on its own; valid ones are queued, invalid ones get an error."""
    state = master_state(request)
    backend = get_backend(request)
    checker = await state.entries.checker(backend, automation_type)
    ttl = state.settings.idempotency_ttl_seconds
    parent = request.headers.get("traceparent")
    results = await tasks.submit_batch(
        backend, checker, automation_type, body.tasks, ttl, parent, scoped=_scoped(principal)
    )
    return JSONResponse({"results": results}, status_code=202)


@router.get(
    "/automations/{automation_type}/tasks/{task_id}",
    response_model=TaskRecord,
    summary="A task's record",
)
async def task_state(
    automation_type: TypeName,
    task_id: str,
    request: Request,
    wait: float | None = Query(
        None, gt=0, le=MAX_WAIT_SECONDS, description="Hold the answer until the task ends."
    ),
    payload: bool = Query(
        False, description="Also the task's payload, group and run, where a body is kept."
    ),
    _: Any = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """``state`` (queued, scheduled, processing, dead, done, cancelled or unknown),
    attempt, times, last error, progress and outputs. ``?wait=`` (at most 60 s)
    answers when the task ends or the time is up; ``?payload=true`` adds the
    payload, group and run of a pending, scheduled, processing or dead task. A
    client that leaves ends its wait at once."""
    waits = master_state(request).waits
    found = tasks.state_of(backend, automation_type, task_id, wait, payload, waits)
    return await (found if wait is None else unless_disconnected(request, found))


@router.delete(
    "/automations/{automation_type}/tasks/{task_id}",
    response_model=TaskCancelled,
    summary="Cancel a task",
)
async def cancel_task(
    automation_type: TypeName,
    task_id: str,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """A queued or scheduled task is removed (``cancelled``); a processing one is
    stopped in its slot (``cancelling``). 404 if the task is in neither state."""
    outcome = await tasks.cancel(backend, automation_type, task_id)
    return {"task_id": task_id, "outcome": outcome}


@router.get(
    "/automations/{automation_type}/queue", response_model=QueueDepths, summary="Queue depths"
)
async def queue_depths(
    automation_type: TypeName,
    _: Any = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Depths per tier, processing, scheduled and dead; the oldest pending task's age."""
    return await tasks.depths_of(backend, automation_type)
