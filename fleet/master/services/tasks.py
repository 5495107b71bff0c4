"""Submitting and cancelling tasks: one submit, the batch loop, cancel-then-publish.

The routes of ``routes/tasks.py`` parse the request and answer; what a submit does
(validate the payload against the type's checker, build the push request, push in
chunks) and what a cancel does (cancel in the backend, then tell the worker running
the task) is here.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from fleet.backends.base import Backend
from fleet.core import tracing
from fleet.core.errors import InvalidInput, NotFound, Refused
from fleet.core.records import PushRequest, PushResult
from fleet.core.results import FINAL_STATES, MAX_WAIT_SECONDS
from fleet.core.runs import RunRecord
from fleet.core.submission import make_push_request
from fleet.master.http.models import SubmitBody
from fleet.master.services import runs
from fleet.master.services.catalog import require_entry
from fleet.master.services.secrets import mask_credentials, mask_task
from fleet.master.services.validation import (
    ErrorList,
    PayloadChecker,
    non_finite_errors,
)
from fleet.master.services.waits import Waits
from fleet.protocol import cancel_topic

#: Requests per backend push call of a batch (keeps each backend transaction short).
PUSH_CHUNK = 500

#: Where a task sits in a request, for error locations (``("body",)`` for one submit).
Loc = tuple[str | int, ...]


def push_request(
    body: SubmitBody, idempotency_ttl: float, traceparent: str | None = None
) -> PushRequest:
    """The backend's push request of one submitted task."""
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
        timeout_seconds=body.timeout_seconds,
        traceparent=traceparent,
        run=body.run,
        unique_key=body.unique_key,
    )


def submit_result(res: PushResult) -> dict[str, Any]:
    """One submit's answer, shaped as ``SubmitResult``.

    Built as a plain dict and answered as JSON (the route's response_model documents
    the shape), without a model built and re-validated per task, which costs a
    10,000-task batch more than queueing it.
    """
    return {"task_id": res.task_id, "queued": res.queued, "duplicate": res.duplicate}


def task_errors(checker: PayloadChecker, body: SubmitBody, loc: Loc) -> ErrorList:
    """The payload's errors: non-finite numbers first, then the type's schema."""
    errors = non_finite_errors(body.payload, (*loc, "payload"))
    if errors:
        return errors
    return checker.errors(body.payload, (*loc, "payload"))


async def submit_one(
    backend: Backend,
    checker: PayloadChecker,
    automation_type: str,
    body: SubmitBody,
    idempotency_ttl: float,
    traceparent: str | None = None,
    *,
    scoped: frozenset[str] | None,
) -> dict[str, Any]:
    """Validate one task and push it; its ``SubmitResult``. ``traceparent`` (the
    request's W3C header) is kept with the task; with tracing on, the submit is a
    span of its own under it. A task with a ``run`` goes in as
    :func:`fleet.master.services.runs.check_open` lets the caller submit it
    (``scoped``: a scoped token's types; None for the admin token).

    Raises:
        InvalidInput: The payload does not fit the type's ``TaskPayload``, a
            malformed run id or a delay past the run's ``max_delay_seconds`` (422).
        Refused: 403, 404 or 409 for the run (``runs.check_open``).
    """
    errors = task_errors(checker, body, ("body",))
    if errors:
        raise InvalidInput(errors)
    if body.run is not None:
        await runs.check_open(backend, body.run, automation_type, scoped, body.delay_seconds)
    if traceparent is None and not tracing.ACTIVE:
        result = await backend.queues.push_one(automation_type, push_request(body, idempotency_ttl))
        return submit_result(result)
    with tracing.submit_span(automation_type, traceparent) as parent:
        request = push_request(body, idempotency_ttl, parent)
        return submit_result(await backend.queues.push_one(automation_type, request))


def _parse_error(exc: ValidationError, loc: Loc) -> dict[str, Any]:
    detail = [
        {"type": e["type"], "loc": [*loc, *e["loc"]], "msg": e["msg"]}
        for e in exc.errors(include_url=False, include_context=False)
    ]
    return {"error": detail[0]["msg"], "detail": detail}


def _payload_error(errors: ErrorList) -> dict[str, Any]:
    detail = [{k: v for k, v in e.items() if k != "input"} for e in errors]
    where = ".".join(str(p) for p in detail[0]["loc"][3:])
    return {"error": f"{where}: {detail[0]['msg']}", "detail": detail}


async def submit_batch(
    backend: Backend,
    checker: PayloadChecker,
    automation_type: str,
    tasks: list[Any],
    idempotency_ttl: float,
    traceparent: str | None = None,
    *,
    scoped: frozenset[str] | None,
) -> list[dict[str, Any] | None]:
    """Validate each task on its own and push the valid ones, ``PUSH_CHUNK`` a call
    (with ``traceparent``, all in one submit span: see :func:`submit_one`; the run
    of each task checked as there, each run read once).

    Returns:
        One result per task, in order: its ``SubmitResult``, or ``{"error", "detail"}``
        (a ``BatchItemError``) for a task that was refused.
    """
    if traceparent is not None or tracing.ACTIVE:
        with tracing.submit_span(automation_type, traceparent) as parent:
            return await _submit_all(
                backend, checker, automation_type, tasks, idempotency_ttl, parent, scoped
            )
    return await _submit_all(
        backend, checker, automation_type, tasks, idempotency_ttl, None, scoped
    )


async def _submit_all(
    backend: Backend,
    checker: PayloadChecker,
    automation_type: str,
    tasks: list[Any],
    idempotency_ttl: float,
    traceparent: str | None,
    scoped: frozenset[str] | None,
) -> list[dict[str, Any] | None]:
    results: list[dict[str, Any] | None] = [None] * len(tasks)
    pending: list[tuple[int, PushRequest]] = []
    open_runs: dict[str, RunRecord | str] = {}
    for i, raw in enumerate(tasks):
        loc: Loc = ("body", "tasks", i)
        try:
            task = SubmitBody.model_validate(raw)
        except ValidationError as exc:
            results[i] = _parse_error(exc, loc)
            continue
        errors = task_errors(checker, task, loc)
        if errors:
            results[i] = _payload_error(errors)
            continue
        if task.run is not None:
            refused = await _run_refusal(backend, task, automation_type, scoped, open_runs)
            if refused is not None:
                results[i] = refused
                continue
        pending.append((i, push_request(task, idempotency_ttl, traceparent)))
    for start in range(0, len(pending), PUSH_CHUNK):
        chunk = pending[start : start + PUSH_CHUNK]
        pushed = await backend.queues.push(automation_type, [req for _, req in chunk])
        for (i, _req), res in zip(chunk, pushed, strict=True):
            results[i] = submit_result(res)
    return results


async def _run_refusal(
    backend: Backend,
    task: SubmitBody,
    automation_type: str,
    scoped: frozenset[str] | None,
    seen: dict[str, RunRecord | str],
) -> dict[str, Any] | None:
    """A batch item's error if its run does not take it (``runs.check_open``; each
    run read once)."""
    run_id = str(task.run)
    if run_id not in seen:
        try:
            seen[run_id] = await runs.open_run(backend, run_id)
        except Refused as exc:
            seen[run_id] = exc.detail
        except InvalidInput as exc:
            seen[run_id] = str(exc.errors[0]["msg"])
    record = seen[run_id]
    if isinstance(record, str):
        return {"error": record, "detail": []}
    try:
        runs.admit(record, automation_type, scoped, task.delay_seconds)
    except Refused as exc:
        return {"error": exc.detail, "detail": []}
    except InvalidInput as exc:
        return {"error": str(exc.errors[0]["msg"]), "detail": []}
    return None


async def cancel(backend: Backend, automation_type: str, task_id: str) -> str:
    """Cancel a task of a known type: a queued or scheduled one is removed (``cancelled``); for a
    processing one (``cancelling``) the cancel is published to its type's workers,
    whose slot running it stops it.

    Raises:
        NotFound: 404 for an unknown type, or a task in none of these states.
    """
    await require_entry(backend, automation_type)
    outcome = await backend.queues.cancel(automation_type, task_id)
    if outcome == "not_found":
        raise NotFound(
            f"task {task_id!r} is not queued, scheduled or processing",
            resource="task",
            key=task_id,
            automation_type=automation_type,
            task_id=task_id,
        )
    if outcome == "cancelling":
        await backend.events.publish(cancel_topic(automation_type), {"task_id": task_id})
    return outcome


async def state_of(
    backend: Backend,
    automation_type: str,
    task_id: str,
    wait: float | None = None,
    with_payload: bool = False,
    waits: Waits | None = None,
) -> dict[str, Any]:
    """A task's record (``state``, attempt, times, last error, progress, outputs),
    secrets masked. With ``wait`` seconds, answers once the task ended (done,
    dead, cancelled; or unknown) or when the time is up, whichever comes first:
    the wait is one of ``waits``' (the master's shared pollers: one read a tick for
    all the waits of a type). With ``with_payload``, also its ``payload``, ``group``
    and ``run`` from the stored body (null where none is kept: a finished task keeps
    none).

    Raises:
        NotFound: 404 for an unknown type.
    """
    await require_entry(backend, automation_type)
    info = await backend.queues.state(automation_type, task_id)
    if wait is not None and info.state not in FINAL_STATES and info.state != "unknown":
        shared = waits or Waits(backend)
        waited = await shared.task(automation_type, task_id, min(wait, MAX_WAIT_SECONDS))
        # timed out: the state as it is now
        info = waited or await backend.queues.state(automation_type, task_id)
    shown = mask_task(info.to_dict())
    if with_payload:
        # The stored body, where one is kept (pending, scheduled, processing, dead).
        body = await backend.browse.body(automation_type, task_id)
        shown["payload"] = None if body is None else body.payload
        shown["group"] = None if body is None else body.group
        shown["run"] = None if body is None else body.run
    progress = shown.get("progress")
    if isinstance(progress, dict) and isinstance(progress.get("message"), str):
        shown["progress"] = {**progress, "message": mask_credentials(progress["message"])}
    return shown


async def depths_of(backend: Backend, automation_type: str) -> dict[str, Any]:
    """The type's queue depths, ``{"type", ...Depths}``.

    Raises:
        NotFound: 404 for an unknown type.
    """
    await require_entry(backend, automation_type)
    depths = await backend.queues.depths(automation_type)
    return {"type": automation_type, **depths.to_dict()}
