"""Routes over identity pools: create or generate, list, page, one, retire, revive,
delete (what they answer and how secrets are masked: services/identities.py)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from fleet.backends.base import Backend
from fleet.core.errors import Forbidden
from fleet.core.identities import MAX_ID
from fleet.master.http.answers import (
    IdentitiesCreated,
    IdentityDeleted,
    IdentityOut,
    IdentityPage,
    IdentityPools,
)
from fleet.master.http.auth import Principal, admin_access, read_access
from fleet.master.http.models import error_responses
from fleet.master.services import identities
from fleet.master.state import backend_dependency

router = APIRouter(tags=["identities"], responses=error_responses(401, 403, 404, 413, 503))

PoolPath = Annotated[
    str,
    Path(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,199}$", description="An identity pool."),
]
IdPath = Annotated[
    str, Path(min_length=1, max_length=MAX_ID, description="An identity's id (slashes allowed).")
]
#: Most identities one page lists.
MAX_PAGE = 500
_REVEAL = Query(False, description="Show secrets unmasked (admin token only).")


class GenerateBody(BaseModel):
    """Identities to generate, fingerprints coherent with each one's country."""

    model_config = ConfigDict(extra="forbid")

    count: StrictInt = Field(ge=1, description="How many (at most 1,000: 413 above).")
    proxies: list[str] = Field(
        default_factory=list,
        max_length=1000,
        description="Proxy URLs, round robin; '{id}' in one becomes the identity's id.",
    )
    countries: list[str] = Field(
        default_factory=list,
        max_length=1000,
        description="Country codes, round robin: one, or one per proxy (default US).",
    )
    browsers: list[str] = Field(
        default_factory=list,
        max_length=10,
        description="chrome, firefox, edge or safari, round robin (default chrome).",
    )
    id_prefix: str | None = Field(default=None, max_length=180, description="Default 'id-'.")
    proxy_provider: str | None = Field(
        default=None,
        max_length=200,
        description="A fleet.proxy_providers entry point (built in: template) making each "
        "identity's proxy: a session named by its id, in its country (instead of proxies).",
    )
    proxy_provider_config: dict[str, Any] = Field(
        default_factory=dict, description="The provider's settings ({'template': ...})."
    )


class CreateBody(BaseModel):
    """Explicit identities, or a plan to generate them: one of the two."""

    model_config = ConfigDict(extra="forbid")

    identities: list[Any] | None = Field(
        default=None, description="Identities (id, proxy, fingerprint, cookies, account)."
    )
    generate: GenerateBody | None = None


class RetireBody(BaseModel):
    """Why an identity is retired (shown as its last reason)."""

    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(default=None, max_length=500)


def _reveal(reveal: bool, principal: Principal) -> bool:
    if reveal and not principal.is_admin:
        raise Forbidden("only the admin token may reveal secrets", resource="secrets")
    return reveal


@router.get("/identities", response_model=IdentityPools, summary="Identity pools")
async def list_pools(
    _: Any = Depends(read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Every pool that holds an identity, by name, with its counts by state."""
    return await identities.pool_list(backend)


@router.post(
    "/identities/{pool}",
    response_model=IdentitiesCreated,
    summary="Add, replace or generate identities",
    responses=error_responses(400, 501),
)
async def create(
    pool: PoolPath,
    body: CreateBody,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """``{"identities": [...]}`` or ``{"generate": {...}}``, at most 1,000: all checked
    (a 422 names the field), then written in one step. An existing id is replaced."""
    plan = None if body.generate is None else body.generate.model_dump()
    return await identities.create(backend, pool, identities=body.identities, generate=plan)


@router.get("/identities/{pool}", response_model=IdentityPage, summary="A pool's identities")
async def pool_page(
    pool: PoolPath,
    after: str | None = Query(None, max_length=MAX_ID, description="The `next` of the last page."),
    limit: int = Query(50, ge=1, le=MAX_PAGE),
    reveal: bool = _REVEAL,
    principal: Principal = Depends(read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Identities by id, ``limit`` a page, secrets masked; counts by state; 404 for a
    pool that holds no identity."""
    shown = _reveal(reveal, principal)
    return await identities.pool_page(backend, pool, after=after, limit=limit, reveal=shown)


@router.post(
    "/identities/{pool}/{identity_id:path}/retire",
    response_model=IdentityOut,
    summary="Retire an identity",
)
async def retire(
    pool: PoolPath,
    identity_id: IdPath,
    body: RetireBody | None = None,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """No lease takes it until it is revived; leases held end at their release."""
    reason = None if body is None else body.reason
    return await identities.retire(backend, pool, identity_id, reason)


@router.post(
    "/identities/{pool}/{identity_id:path}/revive",
    response_model=IdentityOut,
    summary="Revive an identity",
)
async def revive(
    pool: PoolPath,
    identity_id: IdPath,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """A retired or cooling identity back to ready (its blocks in a row reset)."""
    return await identities.revive(backend, pool, identity_id)


@router.get(
    "/identities/{pool}/{identity_id:path}", response_model=IdentityOut, summary="One identity"
)
async def one(
    pool: PoolPath,
    identity_id: IdPath,
    reveal: bool = _REVEAL,
    principal: Principal = Depends(read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """One identity, its state and stats, secrets masked unless revealed."""
    shown = _reveal(reveal, principal)
    return await identities.one_identity(backend, pool, identity_id, reveal=shown)


@router.delete(
    "/identities/{pool}/{identity_id:path}",
    response_model=IdentityDeleted,
    summary="Delete an identity",
)
async def delete(
    pool: PoolPath,
    identity_id: IdPath,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Remove an identity; its leases and sticky keys go with it."""
    return await identities.delete(backend, pool, identity_id)
