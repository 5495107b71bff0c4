"""Routes over the catalog and automation types; deleting a type's state."""

from __future__ import annotations

from dataclasses import astuple
from typing import Any

from fastapi import APIRouter, Depends, Request

from fleet.backends.base import Backend
from fleet.core.stored import entry_unreadable
from fleet.master.http.auth import Principal, admin_access, list_access, type_read_access
from fleet.master.http.models import TypeName, error_responses
from fleet.master.services.catalog import require_entry, unknown_type
from fleet.master.services.secrets import mask_schema
from fleet.master.services.workers_view import load_views, worker_counts
from fleet.master.state import backend_dependency, master_state
from fleet.protocol import CONTROL_NS, drain_key

router = APIRouter(tags=["catalog"], responses=error_responses(401, 403, 404, 413, 503))


@router.get("/catalog", summary="Every automation's declared schemas")
async def catalog(
    principal: Principal = Depends(list_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, dict[str, Any]]:
    """Type -> ``{type, kind, config, queue, stream, pools, browser}`` (contracts.md)."""
    entries = await backend.catalog_all()
    # Secrets in schema defaults (a proxy URL a plugin wrote down) are masked.
    return {t: mask_schema(e) for t, e in sorted(entries.items()) if principal.sees_type(t)}


@router.get("/catalog/{automation_type}", summary="One automation's declared schemas")
async def catalog_one(
    automation_type: TypeName,
    _: Any = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """One catalog entry; 404 if no plugin or worker published the type."""
    return dict(mask_schema(await require_entry(backend, automation_type)))


@router.get("/automations", summary="Types with kind, worker counts and queue depths")
async def automations(
    request: Request,
    principal: Principal = Depends(list_access),
    backend: Backend = Depends(backend_dependency),
) -> list[dict[str, Any]]:
    """Every catalogued type, and every type that has workers, with a summary."""
    entries = await backend.catalog_all()
    pairs = await backend.workers_all()
    types = sorted({*entries, *(t for t, _ in pairs)})
    heartbeat = master_state(request).settings.heartbeat_seconds
    out = []
    for t in types:
        if not principal.sees_type(t):
            continue
        entry = entries.get(t) or {}
        views = await load_views(backend, [p for p in pairs if p[0] == t], heartbeat)
        depths = await backend.depths(t) if entry.get("queue") else None
        row = {
            "type": t,
            "kind": entry.get("kind"),
            "catalogued": t in entries,
            "has_queue": bool(entry.get("queue")),
            "has_stream": bool(entry.get("stream")),
            "workers": worker_counts(views),
            "queue": depths.to_dict() if depths is not None else None,
        }
        why = entry_unreadable(entry)
        if why is not None:  # listed, with what could not be read instead of its kind
            row["unreadable"] = why
        out.append(row)
    return out


@router.delete("/automations/{automation_type}", summary="Remove all state of a type")
async def delete_type(
    automation_type: TypeName,
    request: Request,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Delete the type's queue, task states, stream, catalog entry, config and
    worker records (the spec's manual clean-up). Workers still running it
    re-register and re-publish their catalog entry. A type the backend holds
    nothing of answers 404."""
    worker_ids = await backend.worker_ids(automation_type)
    if not worker_ids and await backend.catalog_get(automation_type) is None:
        depths = await backend.depths(automation_type)
        held = depths.pending + depths.processing + depths.scheduled + depths.dead
        if not held and not any(astuple(depths.counters)):
            if not await backend.schedule_list_raw(automation_type):
                raise await unknown_type(backend, automation_type)
    await backend.purge_type(automation_type)
    master_state(request).entries.forget(automation_type)
    for wid in worker_ids:  # drain flags live in the KV store, outside the type's keys
        await backend.kv_delete(CONTROL_NS, drain_key(automation_type, wid))
    return {"deleted": automation_type}
