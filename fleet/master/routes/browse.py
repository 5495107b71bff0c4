"""Routes of the task browser: every task of a type findable by state (paged, newest
first), and dead letters replayed or deleted by a selection of ids."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query

from fleet.backends.base import Backend
from fleet.core.capabilities.browse import MAX_LIMIT, MIN_LIMIT, BrowseState
from fleet.master.http.auth import admin_access, type_read_access
from fleet.master.http.models import (
    DeadSelectionBody,
    DeadSelectionResult,
    TaskPageBody,
    TypeName,
    error_responses,
)
from fleet.master.services import browse
from fleet.master.state import backend_dependency

router = APIRouter(tags=["task browser"], responses=error_responses(401, 403, 404, 503))


@router.get(
    "/automations/{automation_type}/tasks",
    response_model=TaskPageBody,
    summary="List a type's tasks by state",
)
async def task_page(
    automation_type: TypeName,
    state: BrowseState = Query(
        "pending", description="pending, scheduled, processing, dead or done (finished)."
    ),
    limit: int = Query(50, ge=MIN_LIMIT, le=MAX_LIMIT),
    after: str | None = Query(None, max_length=4096, description="The previous page's `next`."),
    cursor: str | None = Query(
        None, max_length=4096, description="Deprecated: the old name of `after`.", deprecated=True
    ),
    run: str | None = Query(
        None, min_length=1, max_length=200, description="Only the tasks of this run."
    ),
    _: Any = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> TaskPageBody:
    """The ``limit`` newest tasks of ``state`` (by first submit time, then id; done
    tasks by finish time), strictly after ``after``; with ``run``, that run's only (a
    page may be short and still have a ``next``). A walk lists no task twice; tasks
    that enter the state behind it (new submits, retries, replays) show in the next
    walk. Done tasks are listed while their records are kept."""
    where = "after" if after is not None or cursor is None else "cursor"
    given = after if after is not None else cursor
    return await browse.task_page(backend, automation_type, state, limit, given, where, run)


@router.post(
    "/automations/{automation_type}/dead/selection",
    response_model=DeadSelectionResult,
    responses=error_responses(400, 413),
    summary="Replay or delete selected dead tasks",
)
async def dead_selection(
    automation_type: TypeName,
    body: DeadSelectionBody,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> DeadSelectionResult:
    """Replay (``attempt=0``, priority kept) or delete the dead letters of ``ids``
    (at most 1,000) in one atomic step; ids not in the DLQ come back in ``unknown``."""
    return await browse.dead_selection(
        backend, automation_type, body.ids, replay=body.action == "replay"
    )
