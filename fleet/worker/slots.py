"""What every slot is: an asyncio task running a loop over one context, the parts
its type shares (:class:`SlotEnv`), its phase, and how it is stopped or cancelled.

The loops themselves: :mod:`fleet.worker.batch` (one task at a time, through the
steps of :mod:`fleet.worker.steps`) and :mod:`fleet.worker.continuous`
(``run_slot``, respawned with backoff). ``cleanup(ctx)`` runs after every
``run_one``/``run_slot``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from fleet.backends.base import Backend
from fleet.core import clock
from fleet.core.automation import Automation
from fleet.core.backoff import RetryPolicy
from fleet.core.config import BaseConfig
from fleet.core.context import Context
from fleet.core.outage import OutageLog, is_outage
from fleet.worker import env
from fleet.worker.cancels import PendingCancels
from fleet.worker.feeder import Feeder
from fleet.worker.leases import AckBatcher, LeaseKeeper
from fleet.worker.outcomes import Finished
from fleet.worker.stats import SlotStats, TypeCounters

# Where it lived when the slot loops were one module; tests still read it here.
from fleet.worker.suspects import SUSPECT_PROBATION_SECONDS as SUSPECT_PROBATION_SECONDS

log = logging.getLogger("fleet.worker.slots")

#: Where a slot is; cancelling is only safe while waiting, running or cleaning up
#: (``timeout``: the run past its time limit is cancelled already, see
#: :mod:`fleet.worker.limits`).
Phase = Literal["idle", "wait", "run", "timeout", "cleanup", "settle", "sleep"]
_CANCELLABLE: frozenset[str] = frozenset({"wait", "run", "cleanup", "sleep"})


#: Default seconds a cancelled run past its limit gets to end before its slot is
#: given up (see :mod:`fleet.worker.limits`); ``FLEET_TIMEOUT_GRACE_SECONDS`` sets it.
DEFAULT_GRACE_SECONDS = 5.0


def timeout_grace() -> float:
    """``FLEET_TIMEOUT_GRACE_SECONDS`` (>= 0), or the default when unset or invalid."""
    return env.seconds("FLEET_TIMEOUT_GRACE_SECONDS", DEFAULT_GRACE_SECONDS)


@dataclass(slots=True)
class SlotEnv:
    """What every slot of one type shares.

    Attributes:
        automation_type: The type.
        automation: The type's automation instance (one per worker).
        backend: The backend.
        config: Returns the current validated config.
        counters: The type's totals.
        policy: Retry and respawn backoff.
        feeder: Task source (batch types only).
        keeper: Lease renewer (batch types only).
        acker: Ack batcher (batch types only).
        on_finished: Called with ``(task_id, how)`` after a task is settled (see
            :data:`~fleet.worker.outcomes.Finished`).
        cancels: Cancel requests of tasks no slot ran yet (checked before a run).
        outages: The type's view of the process's backend outages (one line per
            outage of the process, not one per slot and retry).
        suspects: Held by the one suspect task starting (see :mod:`fleet.worker.suspects`).
        timeout_grace: Seconds a run cancelled past its time limit gets to end before
            its slot is given up (``FLEET_TIMEOUT_GRACE_SECONDS``; see
            :mod:`fleet.worker.limits`).
    """

    automation_type: str
    automation: Automation[Any]
    backend: Backend
    config: Callable[[], BaseConfig]
    counters: TypeCounters = field(default_factory=TypeCounters)
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    feeder: Feeder | None = None
    keeper: LeaseKeeper | None = None
    acker: AckBatcher | None = None
    on_finished: Callable[[str, Finished], None] | None = None
    cancels: PendingCancels = field(default_factory=PendingCancels)
    has_cleanup: bool = True
    outages: OutageLog = field(default_factory=lambda: OutageLog(log))
    suspects: asyncio.Lock = field(default_factory=asyncio.Lock)
    timeout_grace: float = field(default_factory=timeout_grace)

    def __post_init__(self) -> None:
        self.has_cleanup = type(self.automation).cleanup is not Automation.cleanup


class Slot:
    """One slot: an asyncio task running the slot loop, and its context.

    Args:
        env: The type's shared parts.
        ctx: This slot's context.
    """

    def __init__(self, env: SlotEnv, ctx: Context[Any]) -> None:
        self.env = env
        self.ctx = ctx
        self.slot_id = ctx.slot_id
        self.started_at = clock.now()
        self.stats = SlotStats(slot=ctx.slot_id, started_at=self.started_at, metrics=ctx.metrics)
        self.stopping = False
        self.task: asyncio.Task[None] | None = None
        self.phase: Phase = "idle"
        self.running_task_id: str | None = None
        #: When the running (or last) attempt's ``run_one`` began (its nack says so).
        self.attempt_started: float | None = None
        self._cancel_reason: str | None = None
        # Outage components, shared by every slot of the type through env.outages.
        self._cleaning = f"{env.automation_type}: cleanup"
        self.settling = f"{env.automation_type}: settling tasks"

    def start(self) -> asyncio.Task[None]:
        """Start the slot loop as an asyncio task."""
        name = f"{self.env.automation_type}.slot.{self.slot_id}"
        self.task = asyncio.create_task(self._run(), name=name)
        return self.task

    async def _run(self) -> None:
        try:
            await self._main()
        finally:
            await self.ctx.proxy.close()  # the slot's place on its proxy

    def stop(self) -> None:
        """Stop gracefully: finish the current task (or let ``run_slot`` see
        ``ctx.shutdown``), take no new one."""
        self.stopping = True
        self.ctx.shutdown.set()
        if self.phase in ("wait", "sleep"):
            self._cancel("stop")

    def interrupt(self) -> None:
        """Stop now: cancel a running ``run_one``/``run_slot`` (a batch task is
        given back at the head of its tier with its attempt refunded)."""
        self.stopping = True
        self.ctx.shutdown.set()
        self._cancel("shutdown")

    def give_up(self) -> None:
        """End the slot once its current task is settled: its ``run_one`` ignored a
        cancel and still runs, detached, with this slot's context (whose
        ``ctx.shutdown`` is set). A fresh slot with the same id takes its place."""
        self.stopping = True
        self.ctx.shutdown.set()

    def cancel_task(self, task_id: str) -> bool:
        """Cancel ``run_one`` if it is running ``task_id`` (the task is then acked
        as cancelled). True if it was."""
        if self.running_task_id != task_id or self.phase != "run":
            return False
        return self._cancel("task")

    def lease_lost(self, task_id: str, attempt: int) -> None:
        """The lease keeper found this slot's lease of ``task_id`` stale: the task
        was handed to another worker. Cancel ``run_one`` if it still runs (the
        same path as a cancel through the API, except that the attempt is then
        neither acked nor nacked: it no longer owns the task)."""
        env = self.env
        if self.running_task_id == task_id and self.phase == "run" and self._cancel("lost"):
            env.counters.zombies_cancelled += 1
            log.warning(
                "%s: task %s attempt %d: lease lost: cancelling the attempt still running; "
                "another worker holds the task",
                env.automation_type,
                task_id,
                attempt,
            )
        else:
            log.warning(
                "%s: task %s attempt %d: lease lost after run_one ended; "
                "its result will be refused",
                env.automation_type,
                task_id,
                attempt,
            )

    def _cancel(self, reason: str) -> bool:
        if self.task is None or self.task.done() or self.phase not in _CANCELLABLE:
            return False
        if self._cancel_reason is None:
            self._cancel_reason = reason
            self.task.cancel()
        return True

    def take_cancel(self) -> str | None:
        """Consume our own cancellation request (None: someone else cancelled us)."""
        reason, self._cancel_reason = self._cancel_reason, None
        if reason is not None:
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
        return reason

    async def run_cleanup(self) -> None:
        """Run the automation's ``cleanup(ctx)``: it never raises, except a
        cancellation that is not the slot's own."""
        if not self.env.has_cleanup:
            return  # the base hook does nothing: skip the call on the hot path
        self.phase = "cleanup"
        try:
            await self.env.automation.cleanup(self.ctx)
            self._cleaned()
        except asyncio.CancelledError:
            if self.take_cancel() is None:
                raise
            self.ctx.logger.warning("cleanup was interrupted by shutdown")
        except Exception as exc:
            if is_outage(exc):
                self.env.outages.failed(self._cleaning, exc, logger=self.ctx.logger)
            else:
                self.ctx.logger.exception("cleanup raised")

    def _cleaned(self) -> None:
        """``cleanup`` returned: its backend calls, if any, worked."""
        # Not proof that the backend answers (a cleanup may not call it): it ends the
        # process's outage only if no other loop still fails.
        self.env.outages.recovered(self._cleaning, certain=False, logger=self.ctx.logger)

    def finished(self, task_id: str, how: Finished) -> None:
        """Report a task's turn in this slot over (``SlotEnv.on_finished``)."""
        if self.env.on_finished is not None:
            self.env.on_finished(task_id, how)

    async def _main(self) -> None:
        raise NotImplementedError
