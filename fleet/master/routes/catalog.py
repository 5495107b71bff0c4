"""Routes over the catalog and automation types; deleting a type's state."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request

from fleet.backends.base import Backend
from fleet.master.http.answers import CatalogEntryOut, TypeDeleted, TypeRow
from fleet.master.http.auth import Principal, admin_access, list_access, type_read_access
from fleet.master.http.models import TypeName, error_responses
from fleet.master.services import types
from fleet.master.services.catalog import shown_catalog, shown_entry
from fleet.master.state import backend_dependency, master_state, shared_views, views_changed

router = APIRouter(tags=["catalog"], responses=error_responses(401, 403, 404, 413, 503))


@router.get(
    "/catalog",
    response_model=dict[str, CatalogEntryOut],
    summary="Every automation's declared schemas",
)
async def catalog(
    principal: Principal = Depends(list_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, dict[str, Any]]:
    """Type -> ``{type, kind, config, queue, stream, pools, browser}`` (contracts.md)."""
    return await shown_catalog(backend, principal.sees_type)


@router.get(
    "/catalog/{automation_type}",
    response_model=CatalogEntryOut,
    summary="One automation's declared schemas",
)
async def catalog_one(
    automation_type: TypeName,
    _: Any = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """One catalog entry; 404 if no plugin or worker published the type."""
    return await shown_entry(backend, automation_type)


@router.get(
    "/automations",
    response_model=list[TypeRow],
    summary="Types with kind, worker counts and queue depths",
)
async def automations(
    request: Request,
    principal: Principal = Depends(list_access),
    backend: Backend = Depends(backend_dependency),
) -> list[dict[str, Any]]:
    """Every catalogued type, and every type that has workers, with a summary (the
    worker counts as ``GET /workers`` shows them: as of at most two seconds ago)."""
    state = master_state(request)
    read = await shared_views(request).read()
    rates = state.metrics.rates if state.metrics is not None else None
    return await types.type_rows(
        backend, principal.sees_type, state.settings.heartbeat_seconds, read, rates
    )


@router.delete(
    "/automations/{automation_type}",
    response_model=TypeDeleted,
    summary="Remove all state of a type",
)
async def delete_type(
    automation_type: TypeName,
    request: Request,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Delete the type's queue, task states, stream, catalog entry, config and
    worker records (the spec's manual clean-up). Workers still running it
    re-register and re-publish their catalog entry. A type the backend holds
    nothing of answers 404; a type with live tasks in a running run answers 409
    (cancel the run first)."""
    try:
        await types.delete_type(backend, automation_type, master_state(request).entries.forget)
    finally:
        views_changed(request)  # even a purge that failed half-way may have removed workers
    return {"deleted": automation_type}
