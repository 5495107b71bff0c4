"""The schedule firer: one per worker and master process; one of them fires.

Every firer tries to hold the backend lock ``fleet-schedules``; the holder renews it
every quarter second and fires what is due, the others try again every second. A
holder that dies loses the lock after ``HOLD_SECONDS``, and the next firer to try
takes over: firing moves within a few seconds and needs no master.

Firing a tick is two steps: push the tick's task (its id and idempotency key are
:func:`~fleet.core.schedule.tick_task_id`, so a second push of the same tick is a
duplicate), then move the schedule on with a compare-and-set. A crash between the two,
two firers racing after a lock hand-over, or a REST edit in between can at worst
repeat the first step, which the idempotent submit absorbs: exactly one task per tick.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fleet.backends.base import Backend
from fleet.core.cancelling import cancel_and_wait
from fleet.core.outage import OutageLog, is_outage
from fleet.core.records import PushRequest, new_id, new_token, now
from fleet.core.schedule import Plan, ScheduleRecord, plan, tick_task_id
from fleet.core.submission import make_push_request

log = logging.getLogger("fleet.scheduler")

LOCK = "fleet-schedules"
#: How long the lock outlives a firer that stopped renewing it.
HOLD_SECONDS = 3.0
#: How often the holder looks for due schedules (and renews the lock).
TICK_SECONDS = 0.25
#: How often a firer without the lock tries to take it.
STANDBY_SECONDS = 1.0
#: Schedules fired per step at most (the firer takes steps back to back, renewing
#: its lock between them, while a step finds a full batch).
BATCH = 100
#: Seconds between two "running behind" warnings at most.
BEHIND_REPORT_SECONDS = 60.0
#: A firer later than this with a tick is worth a warning.
BEHIND_SECONDS = 2.0
#: A tick's idempotency key outlives the window in which a second firer could push
#: the same tick again (a take-over, a firer stalled past its lock) by far, yet ends
#: with the schedule's period: a one-second schedule keeps a few hundred keys, not a
#: week of them.
TICK_KEY_MIN_TTL = 300.0
TICK_KEY_MAX_TTL = 7 * 86400.0


def tick_key_ttl(period: float) -> float:
    """How long a tick's idempotency key lives, for a schedule of ``period`` seconds."""
    return min(TICK_KEY_MAX_TTL, max(TICK_KEY_MIN_TTL, 2 * period))


def _request(record: ScheduleRecord, task_id: str, key_ttl: float | None) -> PushRequest:
    """One run's push; with ``key_ttl`` the task id is also its idempotency key."""
    d = record.definition
    return make_push_request(
        d["payload"],
        task_id=task_id,
        priority=d.get("priority") or 0,
        max_attempts=d.get("max_attempts"),
        group=d.get("group"),
        idempotency_key=task_id if key_ttl is not None else None,
        idempotency_ttl_seconds=key_ttl,
        tick=True,
    )


#: Checks a payload against its type's current ``TaskPayload``: the error's text, or
#: None if it fits (or cannot be checked here).
PayloadCheck = Callable[[str, Any], Awaitable[str | None]]


async def _no_check(automation_type: str, payload: Any) -> str | None:
    return None


@dataclass
class FireReport:
    """What one :func:`fire_due` call did (the firer sums them for its log)."""

    due: int = 0  #: schedules read (a full batch means more may be due)
    fired: int = 0  #: ticks enqueued
    missed: int = 0  #: ticks missed (misfires)
    lag: float = 0.0  #: how late the latest fired tick was, seconds
    refused: int = 0  #: ticks not enqueued: the payload no longer fits


async def fire_due(
    backend: Backend, at: float | None = None, check: PayloadCheck = _no_check
) -> FireReport:
    """Fire the schedules due at ``at`` (default now), up to ``BATCH`` of them.

    The ticks of one type are pushed in one call. A schedule whose payload no longer
    fits its type's ``TaskPayload`` (``check``) enqueues nothing: it moves on and
    carries the error (one WARNING when the error first appears).
    """
    t = now() if at is None else at
    report = FireReport()
    due = await backend.schedules.due(t, BATCH)
    report.due = len(due)
    steps: list[tuple[ScheduleRecord, Plan, str | None]] = []
    pushes: dict[str, list[tuple[int, PushRequest]]] = {}
    for record in due:
        step = plan(record, t)
        if step is None:
            continue
        report.missed += step.missed
        error = None
        if step.fire is not None:
            error = await check(record.automation_type, record.definition["payload"])
            if error is None:
                ttl = tick_key_ttl(step.next_run - step.fire)
                request = _request(record, tick_task_id(record.id, step.fire), ttl)
                pushes.setdefault(record.automation_type, []).append((len(steps), request))
                report.lag = max(report.lag, t - step.fire)
            else:
                report.refused += 1
                if error != record.last_error:
                    log.warning(
                        "%s: schedule %r enqueues nothing: its payload no longer fits the "
                        "type's TaskPayload (%s)",
                        record.automation_type,
                        record.id,
                        error,
                    )
        steps.append((record, step, error))
    task_ids: dict[int, str] = {}
    for automation_type, items in pushes.items():
        results = await backend.queues.push(automation_type, [req for _, req in items])
        for (i, _), result in zip(items, results, strict=True):
            task_ids[i] = result.task_id
    swaps = []
    for i, (record, step, error) in enumerate(steps):
        fired = i in task_ids
        report.fired += fired
        moved = record.evolve(
            next_run=step.next_run,
            last_run=step.fire if fired else record.last_run,
            last_task_id=task_ids[i] if fired else record.last_task_id,
            last_error=error,
            updated_at=t,
        )
        swaps.append(backend.schedules.swap(record, moved))
    # Independent compare-and-sets: sent together (one pipelined round trip on Redis)
    # rather than one round trip per schedule.
    await asyncio.gather(*swaps)
    return report


class _Behind:
    """At most one WARNING a minute on how far behind the firer runs and how many
    ticks it missed, never a line per schedule."""

    def __init__(self, every: float = BEHIND_REPORT_SECONDS) -> None:
        self.every = every
        self.since = time.monotonic()
        self.missed = 0
        self.lag = 0.0

    def add(self, report: FireReport) -> None:
        self.missed += report.missed
        self.lag = max(self.lag, report.lag)
        elapsed = time.monotonic() - self.since
        if elapsed < self.every:
            return
        if self.missed or self.lag > BEHIND_SECONDS:
            log.warning(
                "schedules: the firer ran up to %.1fs behind and %d tick(s) were missed "
                "(misfires) in the last %.0fs",
                self.lag,
                self.missed,
                elapsed,
            )
        self.since, self.missed, self.lag = time.monotonic(), 0, 0.0


async def run_now(backend: Backend, record: ScheduleRecord) -> str:
    """Enqueue one run of a schedule now (its own task id, outside the ticks) and
    record it as the last run; returns the task id."""
    request = _request(record, f"schedule:{record.id}:run:{new_id()}", None)
    task_id = (await backend.queues.push_one(record.automation_type, request)).task_id
    for _ in range(3):  # the firer may move it meanwhile: re-read and retry
        current = await backend.schedules.get(record.automation_type, record.id)
        if current is None:
            break
        done = current.evolve(last_run=now(), last_task_id=task_id, updated_at=now())
        if await backend.schedules.swap(current, done):
            break
    return task_id


class ScheduleFirer:
    """The firer loop of one process (see the module docstring).

    Args:
        backend: The fleet's backend.
        name: Who runs it, for logs (``worker host-1``, ``master``).
    """

    def __init__(self, backend: Backend, name: str, check: PayloadCheck = _no_check) -> None:
        self.backend = backend
        self.name = name
        self.check = check
        self._behind = _Behind()
        self._token = new_token()
        self.leading = False
        self._task: asyncio.Task[None] | None = None
        self._outages = OutageLog(log)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="fleet-schedules")

    async def stop(self) -> None:
        """Stop firing and hand the lock over at once."""
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait(task)
        if self.leading:
            self.leading = False
            try:
                await self.backend.locks.release(LOCK, self._token)
            except Exception as exc:  # the lock runs out by itself
                log.debug("could not release the schedules lock: %s", exc)

    async def _lead(self) -> bool:
        if self.leading:
            self.leading = await self.backend.locks.renew(LOCK, self._token, HOLD_SECONDS)
            if not self.leading:
                log.info("%s no longer fires schedules (its lock ran out)", self.name)
        if not self.leading:
            self.leading = await self.backend.locks.acquire(LOCK, self._token, HOLD_SECONDS)
            if self.leading:
                log.info("%s fires the fleet's schedules", self.name)
        return self.leading

    async def _fire(self) -> None:
        # Back to back while full batches come, the lock renewed between them: a
        # thousand schedules due at once fire within the second, by one firer.
        while True:
            report = await fire_due(self.backend, check=self.check)
            self._behind.add(report)
            if report.due < BATCH or not await self._lead():
                return

    async def _loop(self) -> None:
        while True:
            wait = STANDBY_SECONDS
            try:
                if await self._lead():
                    await self._fire()
                    wait = TICK_SECONDS
                self._outages.recovered("schedules")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if is_outage(exc):
                    self._outages.failed("schedules", exc)
                else:
                    log.warning("%s: firing schedules failed: %s", self.name, exc)
            await asyncio.sleep(wait)
