"""Routes over a type's dead-letter queue and output stream."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query

from fleet.backends.base import Backend
from fleet.master.http.answers import DeadLetter, Drained, OutputEntry, Replayed
from fleet.master.http.auth import admin_access, type_read_access
from fleet.master.http.models import PopBody, ReplayBody, TypeName, error_responses
from fleet.master.services import queue
from fleet.master.state import backend_dependency

router = APIRouter(
    tags=["dead letters and output"], responses=error_responses(401, 403, 404, 413, 503)
)


@router.get(
    "/automations/{automation_type}/dead", response_model=list[DeadLetter], summary="Peek the DLQ"
)
async def dead_peek(
    automation_type: TypeName,
    n: int = Query(50, ge=1, le=1_000),
    _: Any = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> list[dict[str, Any]]:
    """Dead-lettered bodies, oldest death first, with last error and attempts."""
    return await queue.dead_letters(backend, automation_type, n)


@router.post(
    "/automations/{automation_type}/dead/replay",
    response_model=Replayed,
    summary="Replay dead tasks",
    responses=error_responses(400),
)
async def dead_replay(
    automation_type: TypeName,
    body: ReplayBody | None = None,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Re-enqueue dead tasks with ``attempt=0``, keeping priority: the ones named by
    ``task_ids``, else the ``n`` oldest, else all."""
    body = body or ReplayBody()
    return {"replayed": await queue.replay(backend, automation_type, body.n, body.task_ids)}


@router.delete(
    "/automations/{automation_type}/dead", response_model=Drained, summary="Drain the DLQ"
)
async def dead_drain(
    automation_type: TypeName,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Remove every dead-lettered task of the type."""
    return {"drained": await queue.drain_dead(backend, automation_type)}


@router.get(
    "/automations/{automation_type}/output",
    response_model=list[OutputEntry],
    summary="Peek the output stream",
)
async def output_peek(
    automation_type: TypeName,
    n: int = Query(20, ge=1, le=1_000),
    newest: bool = Query(
        False, description="The n newest entries instead (still oldest first), as a tail."
    ),
    _: Any = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> list[dict[str, Any]]:
    """The ``n`` oldest entries ``{id, ts, worker_id, payload}``, not removed; with
    ``newest=true`` the ``n`` newest ones, still in time order (what ``fleet tail``
    shows)."""
    return await queue.output(backend, automation_type, n, newest=newest)


@router.post(
    "/automations/{automation_type}/output/pop",
    response_model=list[OutputEntry],
    summary="Pop from the output stream",
    responses=error_responses(400),
)
async def output_pop(
    automation_type: TypeName,
    body: PopBody | None = None,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> list[dict[str, Any]]:
    """Remove and return the ``n`` oldest entries (each goes to one caller only)."""
    return await queue.pop_output(backend, automation_type, (body or PopBody()).n)
