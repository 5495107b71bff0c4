"""The answers of the webhook routes (``routes/webhooks.py``), beside
:mod:`fleet.master.http.answers` and built on its :class:`~fleet.master.http.answers.Answer`
(a module of their own: that one holds every other answer and is near the size cap)."""

from __future__ import annotations

from pydantic import Field

from fleet.master.http.answers import Answer


class WebhookOut(Answer):
    """A webhook subscription (``GET /webhooks/{id}``): its secret masked, except in
    the answer of its creation."""

    id: str
    url: str
    events: list[str]
    secret: str = Field(description="`whsec_...`: in full at creation only, masked after.")
    created_at: float
    types: list[str] | None
    runs: list[str] | None
    description: str
    enabled: bool


class WebhookList(Answer):
    """``GET /webhooks``: every subscription, oldest first, secrets masked."""

    webhooks: list[WebhookOut]


class WebhookDeleted(Answer):
    """``DELETE /webhooks/{id}``."""

    id: str
    deleted: bool


class WebhookTest(Answer):
    """``POST /webhooks/{id}/test``: the ``webhook.test`` event queued."""

    webhook: str
    event_id: str
    queued: bool


class WebhookDelivery(Answer):
    """One delivery of the log: its event, status, attempts, last answer or error."""

    event_id: str
    event_type: str
    status: str = Field(description="pending, delivered, failed (to be retried) or dead.")
    attempts: int
    http_status: int | None
    error: str | None
    created_at: float
    updated_at: float


class WebhookDeliveries(Answer):
    """``GET /webhooks/{id}/deliveries``: a page of the log, newest first."""

    webhook: str
    deliveries: list[WebhookDelivery]
    next: str | None
