"""Routes over runs: create, read (``?wait``), list, cancel, pause, resume
(services/runs.py)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from fleet.backends.base import Backend
from fleet.core.results import MAX_WAIT_SECONDS
from fleet.core.runs import MAX_MAX_DELAY, MAX_RUN_TYPES
from fleet.master.http.answers import RunCreated, RunOut, RunPage
from fleet.master.http.auth import admin_access, read_access
from fleet.master.http.disconnect import unless_disconnected
from fleet.master.http.models import RunBody, error_responses
from fleet.master.services import runs
from fleet.master.state import backend_dependency, master_state

router = APIRouter(tags=["runs"], responses=error_responses(401, 403, 404, 413, 503))

#: A run id as ``POST /runs`` answers it (32 lowercase hex digits): anything else is a
#: 422 (``runs.valid_run_id``), never a backend read.
RunId = Annotated[str, Path(description="A run id (32 lowercase hex digits).")]


class RunCreate(RunBody):
    """A run to create: :class:`RunBody`, the types that may join it and the longest
    delay of its tasks (docs/runs.md)."""

    types: list[str] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_RUN_TYPES,
        description="The automation types a scoped token may submit into the run (an "
        "admin token and the run's own tasks may submit any type). Without it, only "
        "those may.",
    )
    max_delay_seconds: float | None = Field(
        default=None,
        ge=0,
        le=MAX_MAX_DELAY,
        description="The longest delay_seconds a task of the run may have (default 86400).",
    )
    budget: dict[str, float] | None = Field(
        default=None,
        description='Caps by meter, e.g. {"spend": 50} or {"bytes": 5e9, '
        '"solver_calls": 1000}: the run pauses when its meters reach one (docs/costs.md).',
    )
    monitors: dict[str, Any] | None = Field(
        default=None,
        description='Thresholds on its data, e.g. {"min_items": 100, "max_null_rate": '
        '{"price": 0.05}}: checked live and when it ends (docs/monitors.md).',
    )


class PauseBody(BaseModel):
    """Why the run is paused (shown with it)."""

    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(default=None, min_length=1, max_length=500)


class ResumeBody(BaseModel):
    """The run's new budget, if it changes (a run paused at its budget needs a higher
    one)."""

    model_config = ConfigDict(extra="forbid")

    budget: dict[str, float] | None = Field(default=None, description="Caps by meter.")


@router.post(
    "/runs",
    response_model=RunCreated,
    status_code=201,
    responses=error_responses(400),
    summary="Create a run",
)
async def create_run(
    body: RunCreate,
    request: Request,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """A new run (``running``); submit tasks into it with ``"run": run_id``.
    Its ``on_complete`` task (of a known type; 404 otherwise) is submitted once
    when it ends done."""
    return await runs.create(
        backend,
        body.name,
        body.on_complete,
        body.types,
        body.max_delay_seconds,
        max_bytes=master_state(request).settings.max_body_bytes,
        budget=body.budget,
        monitors=body.monitors,
    )


@router.get("/runs", response_model=RunPage, summary="List runs")
async def list_runs(
    after: str | None = Query(None, max_length=200, description="The previous page's `next`."),
    limit: int = Query(50, ge=1, le=runs.MAX_PAGE),
    _: Any = Depends(read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Runs, newest first, ``limit`` a page and at most about 1 MB of JSON:
    ``{"runs": [...], "next": cursor}``."""
    if after is not None:
        runs.valid_run_id(after, ("query", "after"))
    return await runs.page(backend, after, limit)


@router.get("/runs/{run_id}", response_model=RunOut, summary="A run's state and counters")
async def get_run(
    run_id: RunId,
    request: Request,
    wait: float | None = Query(
        None, gt=0, le=MAX_WAIT_SECONDS, description="Hold the answer until the run ends."
    ),
    _: Any = Depends(read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """``state`` (running, done, cancelled), times and counters (total and per type).
    ``?wait=`` (at most 60 s) answers when the run ends or the time is up; a client
    that leaves ends its wait at once."""
    runs.valid_run_id(run_id, ("path", "run_id"))
    found = runs.get(backend, run_id, wait, master_state(request).waits)
    return await (found if wait is None else unless_disconnected(request, found))


@router.delete("/runs/{run_id}", response_model=RunOut, summary="Cancel a run")
async def cancel_run(
    run_id: RunId,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Cancel its queued and scheduled tasks, stop its running ones; it ends
    ``cancelled`` without its ``on_complete``."""
    return await runs.cancel(backend, run_id)


@router.post(
    "/runs/{run_id}/pause",
    response_model=RunOut,
    responses=error_responses(400, 409),
    summary="Pause a run",
)
async def pause_run(
    run_id: RunId,
    body: PauseBody | None = None,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Its queued tasks stay queued and are not dispatched; its running ones finish.
    It keeps its counters, unique keys and callback, and takes pushes. A paused run
    answers as it is; one that ended is a 409."""
    return await runs.pause(backend, run_id, None if body is None else body.reason)


@router.post(
    "/runs/{run_id}/resume",
    response_model=RunOut,
    responses=error_responses(400, 409),
    summary="Resume a run",
)
async def resume_run(
    run_id: RunId,
    body: ResumeBody | None = None,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Its waiting tasks are dispatched again. ``budget`` replaces its budget; a run
    whose meters already reach the budget it would have is a 422 (raise it)."""
    return await runs.resume(backend, run_id, None if body is None else body.budget)
