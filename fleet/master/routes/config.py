"""Routes over configs: type-wide GET/PATCH and per-worker PATCH."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Depends, Query, Request

from fleet.backends.base import Backend
from fleet.core.errors import Forbidden
from fleet.master.http.answers import ConfigOut, ConfigWritten
from fleet.master.http.auth import Principal, admin_access, type_read_access
from fleet.master.http.models import TypeName, error_responses
from fleet.master.services import configs
from fleet.master.state import backend_dependency, views_changed

router = APIRouter(tags=["config"], responses=error_responses(401, 403, 404, 413, 503))

_PATCH_DOC = (
    "A partial config: the keys given replace the stored ones (nested dicts such as "
    "proxy_provider_config are merged one level deep)."
)


@router.get(
    "/automations/{automation_type}/config",
    response_model=ConfigOut,
    summary="The type-wide config",
)
async def get_config(
    automation_type: TypeName,
    reveal: bool = Query(False, description="Show secrets unmasked (admin token only)."),
    principal: Principal = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """The stored type-wide config, the defaults it falls back to, the effective
    result, required fields still unset, and the ``Config`` JSON schema. Secrets
    (``SecretStr`` fields, keys naming a secret, URL credentials) are masked unless
    the admin asks with ``reveal=true``."""
    if reveal and not principal.is_admin:
        raise Forbidden("only the admin token may reveal secrets", resource="secrets")
    return await configs.type_config(backend, automation_type, reveal=reveal)


@router.patch(
    "/automations/{automation_type}/config",
    response_model=ConfigWritten,
    summary="Change the type-wide config",
    responses=error_responses(400),
)
async def patch_config(
    automation_type: TypeName,
    request: Request,
    patch: dict[str, Any] = Body(..., description=_PATCH_DOC),
    replace: bool = Query(False, description="Replace the stored config instead of merging."),
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Validate against ``Config`` (422), store, bump the generation of every worker of
    the type and push it; per-worker overrides are kept. Masked secrets sent back keep
    the stored ones; a mask that matches no stored secret is a 422."""
    try:
        return await configs.patch_type(backend, automation_type, patch, replace=replace)
    finally:
        views_changed(request)  # every worker's desired generation (even after a failure)


@router.patch(
    "/automations/{automation_type}/workers/{worker_id}/config",
    response_model=ConfigWritten,
    summary="Change one worker's override",
    responses=error_responses(400),
)
async def patch_worker(
    automation_type: TypeName,
    worker_id: str,
    request: Request,
    patch: dict[str, Any] = Body(..., description=_PATCH_DOC),
    replace: bool = Query(False, description="Replace the override instead of merging."),
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Validate the merged config (422), store the override, bump that worker's
    generation and push it. An override of a worker not registered yet is kept for it."""
    try:
        return await configs.patch_worker(
            backend, automation_type, worker_id, patch, replace=replace
        )
    finally:
        views_changed(request)  # its desired generation (even after a failure)
