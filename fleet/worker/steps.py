"""The steps a batch task goes through in its slot, each wrapping the next::

    admit ─▶ lease ─▶ (gate, suspects only) ─▶ attempt ─▶ run_one

Each step returns the attempt's :class:`~fleet.worker.outcomes.Outcome`: the
first that can tell how the attempt ends returns it (a cancelled task is not
leased; a lost lease overrides whatever the run said). The slot then settles
the outcome (:mod:`fleet.worker.settle`).

The steps are plain functions calling one another: per task, one coroutine per
step and nothing else the task did not already need (its ``Task``, its lease);
an outcome is allocated only when something goes wrong.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pydantic import ValidationError

from fleet.core import clock, tracing
from fleet.core.automation import BatchAutomation
from fleet.core.blocks.verdicts import Blocked
from fleet.core.errors import Throttled
from fleet.core.identity import IdentityBlocked, NoIdentity
from fleet.core.records import Reservation
from fleet.core.tasks import Task
from fleet.worker import identities
from fleet.worker.blocks import settle_blocked
from fleet.worker.leases import Lease
from fleet.worker.limits import effective_limit, run_limited
from fleet.worker.outcomes import (
    ACTIONS,
    BLOCKED,
    CANCELLED,
    INTERRUPTED,
    LOST,
    OK,
    Outcome,
    failed,
    invalid,
    throttled,
)
from fleet.worker.slots import Slot
from fleet.worker.suspects import pass_gate
from fleet.worker.traced import traced


def admit(slot: Slot, res: Reservation) -> Task[Any] | Outcome:
    """The task to run, or the outcome of one that must not run: cancelled after
    the reserve (before this slot took it), or a payload that does not validate."""
    env = slot.env
    automation = env.automation
    assert isinstance(automation, BatchAutomation)
    body = res.body
    if env.cancels.take(body.id):
        slot.ctx.logger.info("task %s cancelled before it started", body.id)
        return CANCELLED
    try:
        payload = type(automation).TaskPayload.model_validate(body.payload)
    except ValidationError as exc:
        return invalid(env.automation_type, exc)
    config = env.config()
    return Task(
        id=body.id,
        payload=payload,
        automation_type=env.automation_type,
        attempt=body.attempt,
        max_attempts=body.max_attempts or config.max_attempts,
        priority=body.priority,
        enqueued_at=body.enqueued_at,
        group=body.group,
        timeout_seconds=config.timeout_seconds
        if body.timeout_seconds is None
        else effective_limit(body.timeout_seconds, config.timeout_seconds),
        traceparent=body.traceparent,
        run=body.run,
    )


async def lease(slot: Slot, res: Reservation, task: Task[Any]) -> Outcome:
    """Hold the task's lease while it runs: renewed, its cancel and loss routed to
    the slot. A task to be acked keeps it until the ack lands; a lost lease makes
    the outcome ``lost`` whatever the run said."""
    keeper = slot.env.keeper
    assert keeper is not None
    body = res.body
    # The start mark goes out with the keeper's next batch; no waiting, except
    # for a suspect (see fleet.worker.suspects).
    suspect = body.refunds > 0
    held = keeper.track(
        body.id,
        res.token,
        slot.env.config().visibility_seconds,
        slot.cancel_task,
        lambda task_id: slot.lease_lost(task_id, body.attempt),
        started=not suspect,
    )
    outcome: Outcome | None = None
    try:
        outcome = await (gate(slot, held, task) if suspect else attempt(slot, task))
        # Lost: neither ack nor nack, the stale token would be refused anyway, and
        # the task's fate is up to the attempt that holds it now.
        return LOST if held.lost else outcome
    finally:
        if outcome is not None and ACTIONS[outcome.kind] == "ack" and not held.lost:
            # Renewed until its ack lands: a backend outage that delays the ack
            # past the lease would otherwise hand the finished task out again.
            keeper.hold_for_ack(res.token)
        else:
            keeper.untrack(body.id, res.token)


async def gate(slot: Slot, held: Lease, task: Task[Any]) -> Outcome:
    """Run a suspect through the gate of :mod:`fleet.worker.suspects`: ``lost``
    if its lease was lost while it waited, ``interrupted`` if the slot was
    stopped (the task goes back)."""
    env = slot.env
    assert env.keeper is not None
    slot.phase = "wait"
    try:
        release = await pass_gate(env.suspects, env.keeper, held, slot.ctx.logger)
    except asyncio.CancelledError:
        if slot.take_cancel() is None:
            raise
        release = None
    if release is None:
        if held.lost:
            slot.ctx.logger.warning("task %s: lease lost before it started", held.task_id)
            return LOST
        return INTERRUPTED
    try:
        return await attempt(slot, task)
    finally:
        release()


async def attempt(slot: Slot, task: Task[Any]) -> Outcome:
    """Run the task: a proxy taken for it, ``run_one`` (within its time limit, if
    it has one), then cleanup, with the slot marked busy. An exception, a cancel or
    the time limit becomes the outcome. With tracing on, all of it is the run's span."""
    if tracing.ACTIVE:
        return await traced(slot, task, run_attempt)
    return await run_attempt(slot, task)


async def run_attempt(slot: Slot, task: Task[Any]) -> Outcome:
    """:func:`attempt` without its span."""
    automation = slot.env.automation
    assert isinstance(automation, BatchAutomation)
    if task.run is not None and await slot.ctx.access.book.held_back(task.run):
        return INTERRUPTED  # its run paused at its budget: back uncharged, parked there
    slot.stats.busy = True
    slot.running_task_id = task.id
    slot.ctx.bind_task(task.id, task.attempt, run=task.run)
    slot.phase = "run"
    slot.attempt_started = clock.now()
    started = time.perf_counter()
    outcome: Outcome | None = None
    try:
        try:
            await slot.ctx.proxy.ensure()  # a healthy proxy, a place on it
            outcome = await identities.take(slot)  # the type's identity, if it leases them
            if outcome is not None:
                pass  # none was usable: back uncharged
            elif task.timeout_seconds is None:
                await automation.run_one(task, slot.ctx)
                outcome = OK
            else:  # a task of its own, cancelled past the limit (fleet.worker.limits)
                outcome = await run_limited(slot, task, task.timeout_seconds)
                if outcome is not OK:  # timed out: its error group too (docs/errors.md)
                    slot.ctx.recorder.timed_out(outcome.error or "", outcome.traceback or "")
        except asyncio.CancelledError:
            cancelled = _cancelled(slot, task)
            if cancelled is None:
                raise  # not ours (the loop is going away): the lease runs out
            outcome = cancelled
        except IdentityBlocked:
            outcome = BLOCKED
        except Blocked as exc:
            outcome = await settle_blocked(slot, exc)
        except NoIdentity as exc:  # a proxy tier's pool had none usable: back uncharged
            slot.ctx.logger.warning("%s; the task goes back uncharged", exc)
            outcome = throttled(identities.RETRY_WITHOUT_IDENTITY)
        except Throttled as exc:
            outcome = throttled(exc.retry_after)
        except Exception as exc:
            outcome = failed(exc)
            # Off the success path: the failure lands in its error group (docs/errors.md).
            slot.ctx.recorder.failed(exc, outcome.traceback or "")
        finally:
            slot.running_task_id = None
            slot.ctx.bind_task(None)
            book = slot.ctx.access.book
            if task.run is not None or book.daily_budgeted:
                await book.settle(task.run)  # a budgeted run or type: meters before the ack
            await identities.give_back(slot, outcome)
        if outcome is OK or outcome.kind == "failed":  # cancels say nothing of speed
            slot.env.counters.durations.observe(time.perf_counter() - started)
        await slot.run_cleanup()
        return outcome
    finally:
        slot.stats.busy = False
        # Read at the end: a new config may have given the slot another proxy.
        await slot.ctx.proxy.release()  # its place on the proxy, until the next task


def _cancelled(slot: Slot, task: Task[Any]) -> Outcome | None:
    """The outcome of the slot's own cancel of a running task (None: not its own)."""
    reason = slot.take_cancel()
    if reason is None:
        return None
    if reason == "task":
        slot.ctx.logger.info("task %s cancelled while running", task.id)
        return CANCELLED
    if reason == "lost":
        return LOST  # a zombie: the task is another lease's now
    return INTERRUPTED
