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
import contextlib
import logging

from fleet.backends.base import Backend
from fleet.core.outage import OutageLog, is_outage
from fleet.core.records import new_id, new_token, now
from fleet.core.schedule import ScheduleRecord, plan, tick_task_id
from fleet.core.submission import make_push_request

log = logging.getLogger("fleet.scheduler")

LOCK = "fleet-schedules"
#: How long the lock outlives a firer that stopped renewing it.
HOLD_SECONDS = 3.0
#: How often the holder looks for due schedules (and renews the lock).
TICK_SECONDS = 0.25
#: How often a firer without the lock tries to take it.
STANDBY_SECONDS = 1.0
#: Schedules fired per step at most.
BATCH = 100
#: Idempotency keys of ticks live this long: far longer than any re-fire window.
TICK_KEY_TTL = 7 * 86400.0


async def _push(backend: Backend, record: ScheduleRecord, task_id: str, idempotent: bool) -> str:
    d = record.definition
    request = make_push_request(
        d["payload"],
        task_id=task_id,
        priority=d.get("priority") or 0,
        max_attempts=d.get("max_attempts"),
        group=d.get("group"),
        idempotency_key=task_id if idempotent else None,
        idempotency_ttl_seconds=TICK_KEY_TTL if idempotent else None,
    )
    result = await backend.push_one(record.automation_type, request)
    return result.task_id


async def fire_due(backend: Backend, at: float | None = None) -> int:
    """Fire every schedule due at ``at`` (default now); returns how many ticks were
    enqueued (a duplicate of a tick already enqueued counts too: it is the same)."""
    t = now() if at is None else at
    fired = 0
    for record in await backend.schedule_due(t, BATCH):
        step = plan(record, t)
        if step is None:
            continue
        task_id = record.last_task_id
        if step.fire is not None:
            task_id = await _push(backend, record, tick_task_id(record.id, step.fire), True)
            fired += 1
        if step.missed:
            log.info(
                "%s: schedule %r missed %d tick(s) (misfire=%s): %s",
                record.automation_type,
                record.id,
                step.missed,
                record.definition.get("misfire"),
                "one catch-up run" if step.fire is not None else "skipped",
            )
        moved = record.evolve(
            next_run=step.next_run,
            last_run=step.fire if step.fire is not None else record.last_run,
            last_task_id=task_id,
            updated_at=t,
        )
        await backend.schedule_swap(record, moved)
    return fired


async def run_now(backend: Backend, record: ScheduleRecord) -> str:
    """Enqueue one run of a schedule now (its own task id, outside the ticks) and
    record it as the last run; returns the task id."""
    task_id = await _push(backend, record, f"schedule:{record.id}:run:{new_id()}", False)
    for _ in range(3):  # the firer may move it meanwhile: re-read and retry
        current = await backend.schedule_get(record.automation_type, record.id)
        if current is None:
            break
        done = current.evolve(last_run=now(), last_task_id=task_id, updated_at=now())
        if await backend.schedule_swap(current, done):
            break
    return task_id


class ScheduleFirer:
    """The firer loop of one process (see the module docstring).

    Args:
        backend: The fleet's backend.
        name: Who runs it, for logs (``worker host-1``, ``master``).
    """

    def __init__(self, backend: Backend, name: str) -> None:
        self.backend = backend
        self.name = name
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
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.leading:
            self.leading = False
            try:
                await self.backend.lock_release(LOCK, self._token)
            except Exception as exc:  # the lock runs out by itself
                log.debug("could not release the schedules lock: %s", exc)

    async def _lead(self) -> bool:
        if self.leading:
            self.leading = await self.backend.lock_renew(LOCK, self._token, HOLD_SECONDS)
            if not self.leading:
                log.info("%s no longer fires schedules (its lock ran out)", self.name)
        if not self.leading:
            self.leading = await self.backend.lock_acquire(LOCK, self._token, HOLD_SECONDS)
            if self.leading:
                log.info("%s fires the fleet's schedules", self.name)
        return self.leading

    async def _loop(self) -> None:
        while True:
            wait = STANDBY_SECONDS
            try:
                if await self._lead():
                    await fire_due(self.backend)
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
