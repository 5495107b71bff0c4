"""Settling a batch task: the action :data:`~fleet.worker.outcomes.ACTIONS` names
for its outcome, carried out, counted and reported (``SlotEnv.on_finished``).

A backend call that fails here loses nothing: the lease runs out and the
sweeper re-queues the task.
"""

from __future__ import annotations

import contextlib

from fleet.core.outage import is_outage
from fleet.core.records import Reservation, now
from fleet.core.webhooks import DELIVERY_TYPE
from fleet.webhooks.events import DEAD_TOPIC
from fleet.worker.outcomes import ACTIONS, Outcome
from fleet.worker.slots import Slot


async def settle(slot: Slot, res: Reservation, outcome: Outcome) -> None:
    """Carry out what settles ``outcome`` (:data:`~fleet.worker.outcomes.ACTIONS`)."""
    action = ACTIONS[outcome.kind]
    if action == "ack":
        ack(slot, res)
    elif action == "nack":
        slot.env.counters.failed += 1
        slot.stats.failed += 1
        await nack(slot, res, outcome, dead=False)
    elif action == "bury":
        await nack(slot, res, outcome, dead=True)
    elif action == "throttle":
        slot.env.counters.throttled += 1
        await throttle(slot, res, outcome.retry_after)
    elif action == "release":
        await release(slot, res)
    else:
        slot.finished(res.body.id, "stale")


def ack(slot: Slot, res: Reservation) -> None:
    """The task is done: its ack goes out with the type's next batch."""
    env = slot.env
    assert env.acker is not None
    env.acker.ack(res.body.id, res.token)
    env.counters.completed += 1
    slot.stats.completed += 1
    slot.finished(res.body.id, "done")


async def nack(slot: Slot, res: Reservation, outcome: Outcome, *, dead: bool) -> None:
    """Fail the attempt: retried after the policy's backoff (the backend
    dead-letters it once its attempts are spent), or ``dead`` at once."""
    env = slot.env
    body = res.body
    error = outcome.error
    delay = 0.0 if dead else env.policy.delay(body.attempt)
    try:
        result = await env.backend.queues.nack(
            env.automation_type,
            body.id,
            res.token,
            delay_seconds=delay,
            error=error,
            traceback=outcome.traceback,
            dead=dead,
            worker_id=slot.ctx.worker_id,
            started_at=slot.attempt_started,
        )
    except Exception as exc:
        _failed(slot, exc, "fail", body.id)
        return
    env.outages.recovered(slot.settling, logger=slot.ctx.logger)
    if result == "dead":
        env.counters.dead += 1
        slot.ctx.logger.error(
            "task %s dead-lettered after attempt %d: %s", body.id, body.attempt, error
        )
        slot.finished(body.id, "dead")
        await tell_dead(slot, res, error)
    elif result == "retry":
        env.counters.retried += 1
        slot.ctx.logger.warning(
            "task %s attempt %d failed (%s); retry in %.2fs", body.id, body.attempt, error, delay
        )
        slot.finished(body.id, "retry")
    else:
        slot.finished(body.id, "stale")


async def throttle(slot: Slot, res: Reservation, retry_after: float) -> None:
    """``Throttled`` from ``run_one``: the task goes back uncharged and its group
    (or, without one, the task) waits ``retry_after``, fleet-wide."""
    env = slot.env
    body = res.body
    try:
        ok = await env.backend.groups.throttle(
            env.automation_type, body.id, res.token, retry_after=retry_after
        )
    except Exception as exc:
        _failed(slot, exc, "throttle", body.id)
        return
    env.outages.recovered(slot.settling, logger=slot.ctx.logger)
    if not ok:
        slot.finished(body.id, "stale")
        return
    held = f"group {body.group!r}" if body.group is not None else "the task"
    slot.ctx.logger.info(
        "task %s throttled: %s waits %.1fs (no attempt charged)", body.id, held, retry_after
    )
    slot.finished(body.id, "throttled")


async def release(slot: Slot, res: Reservation) -> None:
    """Give the task back at the head of its tier, its attempt refunded."""
    env = slot.env
    try:
        await env.backend.queues.release(env.automation_type, res.body.id, res.token)
    except Exception as exc:
        _failed(slot, exc, "give back", res.body.id)
        return
    env.outages.recovered(slot.settling, logger=slot.ctx.logger)
    slot.finished(res.body.id, "released")


async def tell_dead(slot: Slot, res: Reservation, error: str | None) -> None:
    """Publish a task this worker dead-lettered on ``tasks.dead`` (the masters make
    it the webhooks' ``task.dead``); paid by dead tasks only, never fails the slot."""
    env = slot.env
    if env.automation_type == DELIVERY_TYPE:
        return  # a dead delivery is in its webhook's log: no event about it (no loop)
    body = res.body
    with contextlib.suppress(Exception):
        message = {
            "type": env.automation_type,
            "task_id": body.id,
            "token": res.token,
            "attempt": body.attempt,
            "error": error,
            "run": body.run,
            "at": now(),
        }
        await env.backend.events.publish(DEAD_TOPIC, message)


def _failed(slot: Slot, exc: Exception, verb: str, task_id: str) -> None:
    if is_outage(exc):
        # One line per outage of the process, not one per task.
        slot.env.outages.failed(slot.settling, exc, logger=slot.ctx.logger)
    else:
        slot.ctx.logger.warning("could not %s task %s: %s", verb, task_id, exc)
