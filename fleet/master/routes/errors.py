"""Routes over a type's error groups and their snapshots (services/errors.py)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query
from fastapi.responses import Response

from fleet.backends.base import Backend
from fleet.core.error_groups import MAX_PAGE
from fleet.master.http.answers import ErrorGroupOut, ErrorGroupPage
from fleet.master.http.auth import type_read_access
from fleet.master.http.models import TypeName, error_responses
from fleet.master.services import errors
from fleet.master.state import backend_dependency

router = APIRouter(tags=["errors"], responses=error_responses(400, 401, 403, 404, 413, 503))

GroupPath = Annotated[
    str, Path(pattern=r"^[0-9a-f]{16}$", description="An error group's id (16 hex digits).")
]
SnapshotPath = Annotated[
    str, Path(pattern=r"^[0-9a-f]{1,32}$", description="A snapshot's id (hex digits).")
]
#: A snapshot's HTML never runs as a page of the master's origin: a sandbox without
#: scripts, nothing loaded from anywhere (it is served as text too).
HTML_HEADERS = {
    "Content-Security-Policy": "sandbox; default-src 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}


@router.get(
    "/automations/{automation_type}/errors",
    response_model=ErrorGroupPage,
    summary="A type's error groups",
)
async def error_page(
    automation_type: TypeName,
    cursor: str | None = Query(None, max_length=100, description="The `cursor` of the last page."),
    limit: int = Query(50, ge=1, le=MAX_PAGE),
    _: Any = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Failures grouped by class, normalised message and location, newest last seen
    first: count, first and last seen, domains, a sample task and message."""
    return await errors.page(backend, automation_type, cursor=cursor, limit=limit)


@router.get(
    "/automations/{automation_type}/errors/{group}",
    response_model=ErrorGroupOut,
    summary="One error group, with its traceback and snapshots",
)
async def one_group(
    automation_type: TypeName,
    group: GroupPath,
    _: Any = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """The group in full: the sample's traceback and its snapshots, newest first."""
    return await errors.one(backend, automation_type, group)


@router.get(
    "/automations/{automation_type}/errors/{group}/snapshots/{snapshot}/html",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}, "description": "The page's HTML."}},
    summary="A snapshot's HTML (as text, sandboxed)",
)
async def snapshot_html(
    automation_type: TypeName,
    group: GroupPath,
    snapshot: SnapshotPath,
    _: Any = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> Response:
    """The HTML as text/plain under ``Content-Security-Policy: sandbox``: shown, never
    run. 404 if the snapshot has none."""
    body = await errors.snapshot(backend, automation_type, group, snapshot, "html")
    return Response(body, media_type="text/plain; charset=utf-8", headers=HTML_HEADERS)


@router.get(
    "/automations/{automation_type}/errors/{group}/snapshots/{snapshot}/screenshot",
    response_class=Response,
    responses={200: {"content": {"image/png": {}}, "description": "The screenshot."}},
    summary="A snapshot's screenshot (PNG)",
)
async def snapshot_png(
    automation_type: TypeName,
    group: GroupPath,
    snapshot: SnapshotPath,
    _: Any = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> Response:
    """The PNG; 404 if the snapshot has none (taken from a response, not a page)."""
    body = await errors.snapshot(backend, automation_type, group, snapshot, "screenshot")
    return Response(body, media_type="image/png", headers={"Cache-Control": "no-store"})
