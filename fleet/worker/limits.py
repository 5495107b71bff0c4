"""Time limits of batch tasks: ``timeout_seconds`` (the task's own, or its type's
config) caps one ``run_one``.

A run with a limit gets an asyncio task of its own, so that the slot can stop
waiting for it: past the limit it is cancelled (an ordinary cancel: its
``finally`` blocks and context managers run, a browser page goes back to its
pool), the slot's ``cleanup`` runs, and the attempt fails with ``TaskTimeout``
(retried like any failure, dead-lettered once its attempts are spent). A run that
swallows the cancel and goes on is left running detached after a grace period
(``FLEET_TIMEOUT_GRACE_SECONDS``, read by
:func:`fleet.worker.slots.timeout_grace`): its slot is given up (counted as
``slots_abandoned``) and a fresh slot takes its place, so capacity stays.

A run without a limit is awaited in the slot's own task as before: no task, no
timer, nothing added to its path.
"""

from __future__ import annotations

import asyncio
import io
import logging
import math
import time
from typing import TYPE_CHECKING, Any

from fleet.core.errors import TaskTimeout
from fleet.worker import stalls
from fleet.worker.outcomes import OK, Outcome

if TYPE_CHECKING:
    from fleet.core.automation import BatchAutomation
    from fleet.core.tasks import Task
    from fleet.worker.slots import Slot

log = logging.getLogger("fleet.worker.limits")

#: Runs left running after their slot gave them up (kept referenced until they end).
_abandoned: set[asyncio.Task[Any]] = set()


def effective_limit(own: Any, configured: float | None) -> float | None:
    """The limit of a task: its own ``timeout_seconds`` if it is a number > 0 (a
    body stored by an older or foreign writer may hold anything), else the config's."""
    if own is None:
        return configured
    if isinstance(own, int | float) and not isinstance(own, bool) and 0 < own < math.inf:
        return float(own)
    return configured


def timed_out(limit: float, stack: str | None, blocked: float | None = None) -> Outcome:
    """The failed outcome of a run cut off at ``limit`` seconds; its traceback is
    where ``run_one`` was when the limit struck, or where it blocked the event loop
    (``blocked``: for how long)."""
    message = f"run_one exceeded timeout_seconds={limit:.15g}"  # 1234567, not 1.23457e+06
    if blocked is not None:
        message += f" (it blocked the event loop for {blocked:.1f}s)"
    return Outcome("failed", error=f"{TaskTimeout.__name__}: {message}", traceback=stack)


async def run_limited(slot: Slot, task: Task[Any], limit: float) -> Outcome:
    """Run ``run_one`` with a time limit: :data:`OK` if it returned in time, the
    :func:`timed_out` outcome past it; what it raised in time is raised here.

    A cancel of the slot (through the API, a lost lease, a shutdown) is passed on
    to the run, which gets the grace period to end, then raised again."""
    automation: BatchAutomation[Any] = slot.env.automation  # type: ignore[assignment]
    run = asyncio.create_task(
        automation.run_one(task, slot.ctx), name=f"{slot.env.automation_type}.run_one.{task.id}"
    )
    started = time.monotonic()
    try:
        await asyncio.wait((run,), timeout=limit)
    except asyncio.CancelledError:
        await stop_run(slot, run, task)
        raise
    stall = stalls.blocked_by(run)
    if run.done():
        if stall is not None and time.monotonic() - started > limit:
            # It blocked the loop, so no timer could stop it: it ended late, not well.
            return _blocked_past(slot, run, task, limit, stall)
        run.result()  # raises what run_one raised
        return OK
    stack = stall.stack if stall is not None else _stack_of(run)
    slot.env.counters.timed_out += 1
    slot.ctx.logger.warning(
        "task %s attempt %d: run_one exceeded timeout_seconds=%.15g: cancelling it",
        task.id,
        task.attempt,
        limit,
    )
    # Its outcome is the timeout: no cancel through the API, lease loss or shutdown
    # cuts the grace period short (a lost lease still shows, as held.lost).
    slot.phase = "timeout"
    await stop_run(slot, run, task)
    slot.phase = "run"
    return timed_out(limit, stack, None if stall is None else stall.seconds())


def _blocked_past(
    slot: Slot, run: asyncio.Task[Any], task: Task[Any], limit: float, stall: stalls.Stall
) -> Outcome:
    """The outcome of a run that ended past its limit because it blocked the loop."""
    if not run.cancelled():
        run.exception()  # retrieved: the attempt's outcome is the timeout
    slot.env.counters.timed_out += 1
    slot.ctx.logger.warning(
        "task %s attempt %d: run_one blocked the event loop for %.1fs, past its "
        "timeout_seconds=%.15g: recorded as timed out",
        task.id,
        task.attempt,
        stall.seconds(),
        limit,
    )
    return timed_out(limit, stall.stack, stall.seconds())


async def stop_run(slot: Slot, run: asyncio.Task[Any], task: Task[Any]) -> None:
    """Cancel ``run`` and wait the grace period for it to end; past it (or if the
    slot is cancelled meanwhile), give the slot up and leave the run detached."""
    run.cancel()
    try:
        await asyncio.wait((run,), timeout=slot.env.timeout_grace)
    finally:
        if not run.done():
            abandon(slot, run, task)
        elif not run.cancelled():
            run.exception()  # retrieved: the attempt's outcome is the timeout or the cancel


def abandon(slot: Slot, run: asyncio.Task[Any], task: Task[Any]) -> None:
    """``run`` ignored its cancel: leave it running, detached, and end the slot once
    its task is settled (a fresh slot with a fresh context takes its place)."""
    env = slot.env
    env.counters.slots_abandoned += 1
    slot.give_up()
    log.warning(
        "%s: slot %d: task %s attempt %d: run_one ignored its cancel for %gs; the slot is "
        "given up (a fresh one replaces it) and the run left behind",
        env.automation_type,
        slot.slot_id,
        task.id,
        task.attempt,
        env.timeout_grace,
    )
    _abandoned.add(run)
    run.add_done_callback(_left_behind_ended)


def _left_behind_ended(run: asyncio.Task[Any]) -> None:
    _abandoned.discard(run)
    if not run.cancelled() and run.exception() is not None:
        log.info("%s, given up earlier, ended: %r", run.get_name(), run.exception())
    else:
        log.info("%s, given up earlier, ended", run.get_name())


def _stack_of(run: asyncio.Task[Any]) -> str | None:
    """Where a running ``run_one`` is suspended, as traceback text."""
    out = io.StringIO()
    try:
        run.print_stack(file=out)
    except Exception:  # pragma: no cover - a debugging aid must never fail the task
        return None
    return out.getvalue() or None
