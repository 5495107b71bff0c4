"""Routes over a type's domains and their proxy tiers (services/domains.py)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from fleet.backends.base import Backend
from fleet.core.tiers import MAX_DOMAIN
from fleet.master.http.answers import DomainForgotten, DomainOut, DomainPage
from fleet.master.http.auth import admin_access, type_read_access
from fleet.master.http.models import TypeName, error_responses
from fleet.master.services import domains
from fleet.master.state import backend_dependency

router = APIRouter(tags=["domains"], responses=error_responses(400, 401, 403, 404, 413, 503))

DomainPath = Annotated[
    str,
    Path(
        min_length=1,
        max_length=MAX_DOMAIN,
        pattern=r"^[^\s/]+$",
        description="A host name, as requests named it.",
    ),
]


class TierBody(BaseModel):
    """The tier to put a domain at: a name of the type's ``proxy_tiers`` or an index."""

    model_config = ConfigDict(extra="forbid")

    tier: str | StrictInt = Field(description="A tier's name, or its index (0: the first).")


@router.get(
    "/automations/{automation_type}/domains",
    response_model=DomainPage,
    summary="A type's domains and their proxy tiers",
)
async def domain_page(
    automation_type: TypeName,
    after: str | None = Query(
        None, max_length=MAX_DOMAIN, description="The `next` of the last page."
    ),
    limit: int = Query(50, ge=1, le=domains.MAX_PAGE),
    _: Any = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Domains by name, ``limit`` a page: the tier each goes through now and since
    when, its verdicts (ok, and blocks by kind; by tier too), the last verdict."""
    return await domains.page(backend, automation_type, after=after, limit=limit)


@router.get(
    "/automations/{automation_type}/domains/{domain}",
    response_model=DomainOut,
    summary="One domain of a type",
)
async def one_domain(
    automation_type: TypeName,
    domain: DomainPath,
    _: Any = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """What the fleet knows of a domain; 404 when no verdict was met there."""
    return await domains.one(backend, automation_type, domain)


@router.put(
    "/automations/{automation_type}/domains/{domain}",
    response_model=DomainOut,
    summary="Put a domain at a proxy tier",
)
async def put_tier(
    automation_type: TypeName,
    domain: DomainPath,
    body: TierBody,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Requests to the domain go through ``tier`` from the next one, on every worker
    (its window and probes start over); 422 for a tier the type does not have."""
    return await domains.put_tier(backend, automation_type, domain, body.tier)


@router.delete(
    "/automations/{automation_type}/domains/{domain}",
    response_model=DomainForgotten,
    summary="Forget a domain",
)
async def forget(
    automation_type: TypeName,
    domain: DomainPath,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """The fleet forgets the domain: it starts again at the first tier. 404 if unknown."""
    return await domains.forget(backend, automation_type, domain)
