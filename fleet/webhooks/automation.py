"""The built-in type ``fleet-webhooks``: each task is one event's delivery to one
subscription, POSTed and signed (:mod:`fleet.webhooks.signing`).

A delivery is a task, so it is at least once: a worker killed mid-request leaves its
lease to run out and another worker makes the attempt again; a failed attempt (no
answer, a non-2xx, a redirect) raises, and the queue's retries (the worker's backoff,
``max_attempts``) carry it on until it is delivered or dead. Every attempt sends the
same ``webhook-id`` and body; each is written to the subscription's delivery log.

Run by every master (an in-process worker, ``FLEET_WEBHOOK_SLOTS``) and by any worker
given it: ``fleet worker --plugin fleet.webhooks.automation --type fleet-webhooks``.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
from pydantic import BaseModel, Field

import fleet
from fleet.core.automation import BatchAutomation, register
from fleet.core.config import BaseConfig
from fleet.core.context import Context
from fleet.core.tasks import Task
from fleet.core.webhooks import DELIVERY_TYPE, Delivery, Hook, Status, clock
from fleet.webhooks.events import Event, event_of
from fleet.webhooks.signing import sign

#: Seconds to connect and to wait for the answer (each read of it).
CONNECT_SECONDS = 5.0
READ_SECONDS = 15.0
#: Bytes of an answer read at most (the rest is not read: only its status matters).
MAX_ANSWER_BYTES = 64 * 1024
#: Characters of an answer or error kept in the log.
MAX_ERROR_CHARS = 300
USER_AGENT = f"Fleet-Webhooks/{fleet.__version__}"


class DeliveryConfig(BaseConfig):
    """The type's config: a few slots; ten attempts, about nine minutes of the worker's
    backoff at its defaults (``FLEET_RETRY_BASE_SECONDS`` 1, doubling up to
    ``FLEET_RETRY_MAX_SECONDS`` 300; more attempts: a longer window); a lease longer
    than one attempt's timeouts."""

    slots: int = Field(default=4, ge=0, le=10_000)
    max_attempts: int = Field(default=10, ge=1, le=1_000)
    visibility_seconds: float = Field(default=60.0, ge=10)
    timeout_seconds: float | None = Field(default=60.0, gt=0, allow_inf_nan=False)


class DeliveryTask(BaseModel):
    """One delivery: the subscription's id and the event (:meth:`Event.to_dict`)."""

    hook: str = Field(min_length=1, max_length=64)
    event: dict[str, Any]


class DeliveryFailed(Exception):
    """An attempt did not deliver (the task is retried, then dead)."""


def headers(hook: Hook, event: Event, body: bytes, at: int) -> dict[str, str]:
    """The request's headers: the Standard Webhooks three, JSON, Fleet's user agent."""
    return {
        "webhook-id": event.id,
        "webhook-timestamp": str(at),
        "webhook-signature": sign(hook.secret, event.id, at, body),
        "content-type": "application/json",
        "user-agent": USER_AGENT,
    }


async def post(hook: Hook, event: Event) -> tuple[int | None, str | None]:
    """One attempt: ``(status, error)``; ``error`` None means delivered (a 2xx).
    Redirects are not followed (a 3xx is a failure); the answer is read up to
    :data:`MAX_ANSWER_BYTES`."""
    body = event.body()
    timeout = httpx.Timeout(READ_SECONDS, connect=CONNECT_SECONDS)
    try:
        async with (
            httpx.AsyncClient(follow_redirects=False, timeout=timeout, trust_env=False) as client,
            client.stream(
                "POST", hook.url, content=body, headers=headers(hook, event, body, int(time.time()))
            ) as answer,
        ):
            read = b""
            async for chunk in answer.aiter_bytes():
                read += chunk
                if len(read) >= MAX_ANSWER_BYTES:
                    break
    except (httpx.HTTPError, httpx.InvalidURL, OSError) as exc:
        # no answer: refused, reset, timed out, a TLS failure, a host not found
        text = str(exc).strip()
        return None, (f"{type(exc).__name__}: {text}" if text else type(exc).__name__)[
            :MAX_ERROR_CHARS
        ]
    if 200 <= answer.status_code < 300:
        return answer.status_code, None
    text = read[:MAX_ERROR_CHARS].decode("utf-8", "replace").strip()
    return answer.status_code, f"HTTP {answer.status_code}" + (f": {text}" if text else "")


@register(DELIVERY_TYPE)
class WebhookDelivery(BatchAutomation[DeliveryConfig]):
    """Deliver one event to one subscription (see the module docstring)."""

    Config = DeliveryConfig
    TaskPayload = DeliveryTask

    async def run_one(self, task: Task[DeliveryTask], ctx: Context[DeliveryConfig]) -> None:
        store = ctx.capabilities.webhooks
        hook = await store.get(task.payload.hook)
        if hook is None:
            ctx.logger.info("webhook %s is gone: delivery %s dropped", task.payload.hook, task.id)
            return
        event = event_of(task.payload.event)
        status, error = await post(hook, event)
        now = clock(time.time())
        state: Status = "delivered"
        if error is not None:
            state = "dead" if task.is_last_attempt else "failed"
        update = Delivery(event.id, event.type, state, task.attempt, status, error, now, now)
        await store.log(hook.id, update)
        if error is not None:
            raise DeliveryFailed(f"{hook.url}: {error}")
