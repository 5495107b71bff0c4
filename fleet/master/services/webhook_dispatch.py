"""The master's side of webhooks: events turned into deliveries, and who makes them.

:func:`dispatch` pushes one task of the built-in type ``fleet-webhooks`` per
subscription that wants an event, with the id and idempotency key
``<event id>.<subscription id>``: an event seen again (a catch-up scan, a second
master, a restart) queues nothing new. Each queued delivery is logged ``pending``.

:class:`WebhookService` runs in every master: while at least one subscription exists
(looked up every :data:`CHECK_SECONDS`, one read) it listens to the fleet-wide topics
(``runs``, ``tasks.dead``, ``identities``, ``domains``), scans the newest runs every
:data:`SCAN_SECONDS` for runs that ended or paused while no master listened, and runs
an in-process delivery worker (``FLEET_MASTER_WEBHOOKS=0``: none; workers given the
type deliver then). Monitors call :func:`monitor_changed` from their check. A fleet
without subscriptions pays the one read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from fleet.backends.base import Backend
from fleet.core.access.router import DOMAINS_TOPIC
from fleet.core.cancelling import cancel_and_wait
from fleet.core.errors import BackendError, UnsupportedBackend
from fleet.core.identity import IDENTITIES_TOPIC
from fleet.core.records import PushRequest, TaskBody
from fleet.core.runs import OPEN_STATES, RunRecord
from fleet.core.webhooks import DELIVERY_TYPE, Delivery, Hook, clock
from fleet.webhooks.events import (
    DEAD_TOPIC,
    Event,
    dead_event,
    identity_event,
    monitor_event,
    run_event,
    tier_event,
)

log = logging.getLogger(__name__)

#: How often a master looks whether any subscription exists.
CHECK_SECONDS = 5.0
#: How often the newest runs are scanned for events no master heard.
SCAN_SECONDS = 30.0
#: Runs a scan reads (newest first) and how far back it looks.
SCAN_RUNS = 200
SCAN_WINDOW_SECONDS = 86_400.0
#: An event's delivery is pushed once per key while the key lives (longer than the
#: scan's window: a scan never queues an event again).
DEDUP_SECONDS = 2 * SCAN_WINDOW_SECONDS
#: Event ids this master dispatched, remembered so that a scan does not push them again.
SEEN_MAX = 10_000
#: How long a master's stop waits for its deliveries under way.
STOP_GRACE_SECONDS = 5.0
#: ``FLEET_MASTER_WEBHOOKS=0``: no in-process delivery worker.
ENV_WORKER = "FLEET_MASTER_WEBHOOKS"
#: The topics whose messages are events (:func:`event_of_message`).
TOPICS = ("runs", DEAD_TOPIC, IDENTITIES_TOPIC, DOMAINS_TOPIC)


def delivery_id(event: Event, hook: Hook) -> str:
    """The task id (and idempotency key) of one event's delivery to one subscription."""
    return f"{event.id}.{hook.id}"


async def dispatch(
    backend: Backend, event: Event, hooks: Sequence[Hook] | None = None, *, force: bool = False
) -> int:
    """Queue ``event``'s delivery to every subscription that wants it (``force``: to
    every one of ``hooks``); how many were queued (repeats are not). A subscription
    created after the event does not get it."""
    found = await backend.webhooks.all() if hooks is None else list(hooks)
    wanted = [
        h
        for h in found
        if force
        or (h.wants(event.type, event.types, event.run) and h.created_at <= event.timestamp + 1)
    ]
    if not wanted:
        return 0
    payload = event.to_dict()
    requests = [
        PushRequest(
            body=TaskBody(id=delivery_id(event, h), payload={"hook": h.id, "event": payload}),
            idempotency_key=delivery_id(event, h),
            idempotency_ttl=DEDUP_SECONDS,
        )
        for h in wanted
    ]
    results = await backend.queues.push(DELIVERY_TYPE, requests)
    queued = 0
    at = clock(time.time())
    for hook, result in zip(wanted, results, strict=True):
        if result.queued:
            queued += 1
            await backend.webhooks.log(
                hook.id, Delivery(event.id, event.type, "pending", 0, None, None, at, at)
            )
    if queued:
        log.info("webhooks: %s %s queued for %d subscription(s)", event.type, event.id, queued)
    return queued


async def monitor_changed(backend: Backend, record: RunRecord, state: dict[str, Any]) -> None:
    """A monitor of a run started or stopped firing (called by the monitors' check,
    which goes on whatever happens here: its state is kept already)."""
    event = monitor_event(record.to_dict(), state)
    if event is None:
        return
    try:
        await dispatch(backend, event)
    except BackendError as exc:
        log.warning("webhooks: %s of run %s not queued: %s", event.type, record.id, exc)


def event_of_message(topic: str, message: Any) -> Event | None:
    """The webhook event of a message on one of :data:`TOPICS`, if it is one."""
    if not isinstance(message, dict):
        return None
    if topic == "runs":
        return run_event(message)
    if topic == DEAD_TOPIC:
        return dead_event(message)
    if topic == IDENTITIES_TOPIC:
        return identity_event(message)
    if topic == DOMAINS_TOPIC:
        return tier_event(message)
    return None


class WebhookService:
    """The master's webhook loops (see the module docstring).

    Args:
        backend: The master's backend.
        check_seconds: How often it looks for subscriptions.
        scan_seconds: How often it scans the newest runs.
    """

    def __init__(
        self,
        backend: Backend,
        check_seconds: float = CHECK_SECONDS,
        scan_seconds: float = SCAN_SECONDS,
    ) -> None:
        self.backend = backend
        self.check_seconds = check_seconds
        self.scan_seconds = scan_seconds
        self.scans = 0
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._task: asyncio.Task[None] | None = None
        self._listener: asyncio.Task[None] | None = None
        self._worker: Any = None

    def start(self) -> None:
        """Start the loop in a background task."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="fleet-webhooks")

    async def stop(self) -> None:
        """Stop listening and the delivery worker (its deliveries under way finish or
        go back to the queue)."""
        for task in (self._task, self._listener):
            if task is not None:
                await cancel_and_wait(task)
        self._task = self._listener = None
        if self._worker is not None:
            worker, self._worker = self._worker, None
            await worker.shutdown()

    async def _run(self) -> None:
        last_scan: float | None = None  # the first pass with subscriptions scans at once
        while True:
            try:
                if await self.backend.webhooks.all():
                    await self._ensure_running()
                    if last_scan is None or time.monotonic() - last_scan >= self.scan_seconds:
                        await self.scan()
                        last_scan = time.monotonic()
            except BackendError as exc:
                log.warning("webhooks: %s", exc)
            except Exception:
                log.exception("webhooks: pass failed")
            await asyncio.sleep(self.check_seconds)

    async def _ensure_running(self) -> None:
        if self._listener is None or self._listener.done():
            sub = await self.backend.events.subscribe(*TOPICS)
            self._listener = asyncio.create_task(self._listen(sub), name="fleet-webhooks-events")
        if self._worker is None and os.environ.get(ENV_WORKER, "1").strip() not in ("0", "false"):
            # Imported here: a master without subscriptions never registers the type.
            from fleet.core.backoff import RetryPolicy
            from fleet.webhooks.automation import WebhookDelivery
            from fleet.worker.agent import Worker

            worker_id = f"master-{socket.gethostname()}-{os.getpid()}"
            # a short grace: a master's stop waits little for an attempt under way (one
            # cut short goes back to the queue, its attempt refunded)
            self._worker = Worker(
                self.backend,
                [WebhookDelivery],
                worker_id,
                grace=STOP_GRACE_SECONDS,
                policy=RetryPolicy.from_env(),
            )
            await self._worker.start()

    async def _listen(self, sub: Any) -> None:
        try:
            async for topic, message in sub:
                event = event_of_message(topic, message)
                if event is None or event.id in self._seen:
                    continue
                try:
                    await self._dispatch(event)
                except BackendError as exc:  # the catch-up scan brings run events back
                    log.warning("webhooks: %s %s not queued: %s", event.type, event.id, exc)
        finally:
            with contextlib.suppress(Exception):
                await sub.aclose()

    async def _dispatch(self, event: Event) -> None:
        if event.type == "run.paused" and event.run is not None and not event.types:
            # A budget's pause (Redis) names the run only, its time rounded by cjson: the
            # record read back gives its types and the stored time (the scan's event id).
            record = await self.backend.runs.get(event.run)
            found = None if record is None else run_event(record.to_dict())
            if found is not None and found.type == "run.paused":
                event = found
        await dispatch(self.backend, event)
        self._remember(event.id)

    def _remember(self, event_id: str) -> None:
        self._seen[event_id] = None
        while len(self._seen) > SEEN_MAX:
            self._seen.popitem(last=False)

    async def scan(self) -> int:
        """Dispatch the events of the newest runs (ended or paused within
        :data:`SCAN_WINDOW_SECONDS`) this master has not dispatched; how many."""
        try:
            page = await self.backend.runs.page(limit=SCAN_RUNS)
        except UnsupportedBackend:  # no runs here (Redis Cluster): nothing to scan
            self.scans += 1
            return 0
        since = time.time() - SCAN_WINDOW_SECONDS
        found = 0
        for record in page.runs:
            if record.state in OPEN_STATES and record.state != "paused":
                continue
            event = run_event(record.to_dict())
            if event is None or event.id in self._seen or event.timestamp < since:
                continue
            await self._dispatch(event)
            found += 1
        self.scans += 1
        return found
