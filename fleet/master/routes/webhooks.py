"""Routes over webhook subscriptions (services/webhooks.py): create (the secret shown
once), list, read, change, delete, a test delivery, the delivery log."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from fleet.backends.base import Backend
from fleet.core.webhooks import EVENTS
from fleet.master.http.auth import admin_access, read_access
from fleet.master.http.models import error_responses
from fleet.master.http.webhook_answers import (
    WebhookDeleted,
    WebhookDeliveries,
    WebhookList,
    WebhookOut,
    WebhookTest,
)
from fleet.master.services import webhooks
from fleet.master.state import backend_dependency

router = APIRouter(tags=["webhooks"], responses=error_responses(400, 401, 403, 404, 413, 503))

HookId = Annotated[str, Path(min_length=1, max_length=64, description="The webhook's id.")]
_EVENTS = f"The events it receives: {', '.join(EVENTS)}."
Names = list[Annotated[str, Field(min_length=1, max_length=200)]]


class WebhookBody(BaseModel):
    """A new subscription."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=webhooks.MAX_URL, description="http(s) URL.")
    events: list[Annotated[str, Field(max_length=64)]] = Field(max_length=20, description=_EVENTS)
    types: Names | None = Field(default=None, max_length=100, description="Only these types.")
    runs: Names | None = Field(default=None, max_length=100, description="Only these runs.")
    description: str | None = Field(default=None, max_length=500)
    secret: str | None = Field(
        default=None, max_length=200, description="`whsec_` + base64 of 24-64 bytes (default: new)."
    )
    enabled: StrictBool = True


class WebhookPatch(BaseModel):
    """The fields to change; the others keep their value."""

    model_config = ConfigDict(extra="forbid")

    events: list[Annotated[str, Field(max_length=64)]] | None = Field(
        default=None, max_length=20, description=_EVENTS
    )
    types: Names | None = Field(default=None, max_length=100)
    runs: Names | None = Field(default=None, max_length=100)
    description: str | None = Field(default=None, max_length=500)
    enabled: StrictBool | None = None


@router.post(
    "/webhooks",
    response_model=WebhookOut,
    status_code=201,
    summary="Subscribe a URL to events",
)
async def create(
    body: WebhookBody,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """The subscription, with its signing secret in full: the only answer that shows it."""
    return await webhooks.create(backend, body.model_dump())


@router.get("/webhooks", response_model=WebhookList, summary="Webhook subscriptions")
async def listing(
    _: Any = Depends(read_access), backend: Backend = Depends(backend_dependency)
) -> dict[str, Any]:
    """Every subscription, oldest first, secrets masked."""
    return await webhooks.listing(backend)


@router.get("/webhooks/{hook_id}", response_model=WebhookOut, summary="A webhook subscription")
async def one(
    hook_id: HookId,
    _: Any = Depends(read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """The subscription, its secret masked."""
    return await webhooks.one(backend, hook_id)


@router.patch("/webhooks/{hook_id}", response_model=WebhookOut, summary="Change a webhook")
async def change(
    hook_id: HookId,
    body: WebhookPatch,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Enable, disable, or change its events or filters (its URL and secret stay)."""
    patch = body.model_dump(exclude_unset=True)
    return await webhooks.change(backend, hook_id, patch)


@router.delete("/webhooks/{hook_id}", response_model=WebhookDeleted, summary="Delete a webhook")
async def delete(
    hook_id: HookId,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Forget the subscription and its log; its queued deliveries are dropped."""
    return await webhooks.delete(backend, hook_id)


@router.post("/webhooks/{hook_id}/test", response_model=WebhookTest, summary="Send a test event")
async def send_test(
    hook_id: HookId,
    _: Any = Depends(admin_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Queue a signed ``webhook.test`` delivery to the subscription."""
    return await webhooks.send_test(backend, hook_id)


@router.get(
    "/webhooks/{hook_id}/deliveries",
    response_model=WebhookDeliveries,
    summary="A webhook's delivery log",
)
async def deliveries(
    hook_id: HookId,
    cursor: str | None = Query(None, max_length=10, description="The `next` of the last page."),
    limit: int = Query(50, ge=1, le=webhooks.MAX_PAGE),
    _: Any = Depends(read_access),
    backend: Backend = Depends(backend_dependency),
) -> dict[str, Any]:
    """Its newest deliveries first (the last 100 are kept)."""
    return await webhooks.deliveries(backend, hook_id, cursor=cursor, limit=limit)
