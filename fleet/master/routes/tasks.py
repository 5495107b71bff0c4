"""Routes that submit and inspect tasks: submit, batch, state, cancel, queue depths."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from fleet.backends.base import Backend
from fleet.core.records import PushRequest, PushResult
from fleet.core.submission import make_push_request
from fleet.master.http.auth import admin_access, submit_access, type_read_access
from fleet.master.http.models import (
    BatchBody,
    BatchResult,
    SubmitBody,
    SubmitResult,
    TypeName,
    error_responses,
)
from fleet.master.services.catalog import require_entry
from fleet.master.services.secrets import mask_task
from fleet.master.services.validation import (
    ErrorList,
    InvalidInput,
    PayloadChecker,
    non_finite_errors,
)
from fleet.master.state import backend_dependency, get_backend, master_state
from fleet.protocol import cancel_topic

router = APIRouter(tags=["tasks"], responses=error_responses(401, 403, 404, 409, 413, 503))

#: Requests per backend push call of a batch (keeps each backend transaction short).
PUSH_CHUNK = 500


def _push_request(body: SubmitBody, idempotency_ttl: float) -> PushRequest:
    return make_push_request(
        body.payload,
        task_id=body.task_id,
        priority=body.priority,
        max_attempts=body.max_attempts,
        ttl_seconds=body.ttl_seconds,
        delay_seconds=body.delay_seconds,
        idempotency_key=body.idempotency_key,
        idempotency_ttl_seconds=idempotency_ttl,
        group=body.group,
    )


def _result(res: PushResult) -> dict[str, Any]:
    # Built as a plain dict and answered as JSON: the shape is SubmitResult's (the
    # route's response_model documents it), without a model built and re-validated
    # per task, which costs a 10,000-task batch more than queueing it.
    return {"task_id": res.task_id, "queued": res.queued, "duplicate": res.duplicate}


def _task_errors(
    checker: PayloadChecker, body: SubmitBody, loc: tuple[str | int, ...]
) -> ErrorList:
    errors = non_finite_errors(body.payload, (*loc, "payload"))
    if errors:
        return errors
    return checker.errors(body.payload, (*loc, "payload"))


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
    _: Any = Depends(submit_access),
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
    errors = _task_errors(checker, body, ("body",))
    if errors:
        raise InvalidInput(errors)
    ttl = state.settings.idempotency_ttl_seconds
    result = await backend.push_one(automation_type, _push_request(body, ttl))
    return JSONResponse(_result(result), status_code=202)


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
    _: Any = Depends(submit_access),
) -> JSONResponse:
    """Validate each task on its own; valid ones are queued, invalid ones get an error."""
    state = master_state(request)
    backend = get_backend(request)
    checker = await state.entries.checker(backend, automation_type)
    ttl = state.settings.idempotency_ttl_seconds
    results: list[dict[str, Any] | None] = [None] * len(body.tasks)
    pending: list[tuple[int, PushRequest]] = []
    for i, raw in enumerate(body.tasks):
        loc: tuple[str | int, ...] = ("body", "tasks", i)
        try:
            task = SubmitBody.model_validate(raw)
        except ValidationError as exc:
            detail = [
                {"type": e["type"], "loc": [*loc, *e["loc"]], "msg": e["msg"]}
                for e in exc.errors(include_url=False, include_context=False)
            ]
            results[i] = {"error": detail[0]["msg"], "detail": detail}
            continue
        errors = _task_errors(checker, task, loc)
        if errors:
            detail = [{k: v for k, v in e.items() if k != "input"} for e in errors]
            where = ".".join(str(p) for p in detail[0]["loc"][3:])
            results[i] = {"error": f"{where}: {detail[0]['msg']}", "detail": detail}
            continue
        pending.append((i, _push_request(task, ttl)))
    for start in range(0, len(pending), PUSH_CHUNK):
        chunk = pending[start : start + PUSH_CHUNK]
        pushed = await backend.push(automation_type, [req for _, req in chunk])
        for (i, _req), res in zip(chunk, pushed, strict=True):
            results[i] = _result(res)
    return JSONResponse({"results": results}, status_code=202)


@router.get("/automations/{automation_type}/tasks/{task_id}", summary="Where one task is")
async def task_state(
    automation_type: TypeName,
    task_id: str,
    _: Any = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """``state`` is queued, scheduled, processing, dead, done, cancelled or unknown."""
    await require_entry(backend, automation_type)
    info = await backend.task_state(automation_type, task_id)
    return mask_task(info.to_dict())


@router.delete("/automations/{automation_type}/tasks/{task_id}", summary="Cancel a task")
async def cancel_task(
    automation_type: TypeName,
    task_id: str,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """A queued or scheduled task is removed (``cancelled``); a processing one is
    stopped in its slot (``cancelling``). 404 if the task is in neither state."""
    await require_entry(backend, automation_type)
    outcome = await backend.cancel(automation_type, task_id)
    if outcome == "not_found":
        raise HTTPException(404, detail=f"task {task_id!r} is not queued, scheduled or processing")
    if outcome == "cancelling":
        await backend.publish(cancel_topic(automation_type), {"task_id": task_id})
    return {"task_id": task_id, "outcome": outcome}


@router.get("/automations/{automation_type}/queue", summary="Queue depths")
async def queue_depths(
    automation_type: TypeName,
    _: Any = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Depths per tier, processing, scheduled and dead; the oldest pending task's age."""
    await require_entry(backend, automation_type)
    depths = await backend.depths(automation_type)
    return {"type": automation_type, **depths.to_dict()}
