"""Routes over workers: list, inspect, drain/resume, forget."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response

from fleet.backends.base import Backend
from fleet.master.http.answers import WorkerAction, WorkerForgotten, WorkerOut
from fleet.master.http.auth import Kind, Principal, admin_access, list_access, type_read_access
from fleet.master.http.models import TypeName, error_responses
from fleet.master.services import workers
from fleet.master.services.workers_view import load_views
from fleet.master.state import backend_dependency, master_state, shared_views, views_changed

router = APIRouter(tags=["workers"], responses=error_responses(401, 403, 404, 413, 503))


@router.get("/workers", summary="Every worker of every type", response_model=list[WorkerOut])
async def all_workers(
    request: Request,
    principal: Principal = Depends(list_access),
) -> Response:
    """Workers with state, last_seen, up, slots, desired vs applied generation (as of
    a read of at most two seconds ago, shared with every other reader of this master;
    its own changes to a worker show at once)."""
    read = await shared_views(request).read()
    # The same JSON FastAPI would make of the list, made once per read for every
    # caller that sees every type (at 1,000 workers, ~20 ms of CPU per answer).
    sees = principal.sees_type if principal.kind is Kind.SCOPED else None
    return Response(read.json(sees), media_type="application/json")


@router.get(
    "/automations/{automation_type}/workers",
    response_model=list[WorkerOut],
    summary="Workers of one type",
)
async def type_workers(
    automation_type: TypeName,
    request: Request,
    _: Any = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> list[dict[str, Any]]:
    """Workers of the type: state, last_seen, slots, config generations, hardware."""
    pairs = [(automation_type, wid) for wid in await backend.workers.ids(automation_type)]
    return await load_views(backend, pairs, master_state(request).settings.heartbeat_seconds)


@router.get(
    "/automations/{automation_type}/workers/{worker_id}",
    response_model=WorkerOut,
    summary="One worker",
)
async def one_worker(
    automation_type: TypeName,
    worker_id: str,
    request: Request,
    _: Any = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """One worker with its config: type-wide, its override, the merged result and
    the desired config written for it (with its generation)."""
    heartbeat = master_state(request).settings.heartbeat_seconds
    return await workers.worker_detail(backend, automation_type, worker_id, heartbeat)


@router.post(
    "/automations/{automation_type}/workers/{worker_id}/drain",
    response_model=WorkerAction,
    summary="Drain",
)
async def drain_worker(
    automation_type: TypeName,
    worker_id: str,
    request: Request,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Stop taking tasks, finish in-flight ones, then idle (until resumed)."""
    try:
        await workers.control(backend, automation_type, worker_id, "drain")
    finally:
        views_changed(request)  # its draining_requested flag
    return {"worker_id": worker_id, "action": "drain"}


@router.post(
    "/automations/{automation_type}/workers/{worker_id}/resume",
    response_model=WorkerAction,
    summary="Resume",
)
async def resume_worker(
    automation_type: TypeName,
    worker_id: str,
    request: Request,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Undo a drain: the worker takes tasks again."""
    try:
        await workers.control(backend, automation_type, worker_id, "resume")
    finally:
        views_changed(request)  # its draining_requested flag
    return {"worker_id": worker_id, "action": "resume"}


@router.delete(
    "/automations/{automation_type}/workers/{worker_id}",
    response_model=WorkerForgotten,
    summary="Forget a worker",
)
async def forget_worker(
    automation_type: TypeName,
    worker_id: str,
    request: Request,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Delete the worker's ``wkr:`` keys and index entries (a live worker comes
    back on its next heartbeat)."""
    try:
        known = await workers.forget(backend, automation_type, worker_id)
    finally:
        views_changed(request)
    return {"worker_id": worker_id, "forgotten": known}
