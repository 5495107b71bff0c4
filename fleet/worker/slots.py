"""The slot loops: a batch slot takes tasks one at a time and settles each
(ack, retry or dead-letter); a continuous slot runs ``run_slot`` and respawns it
with backoff. ``cleanup(ctx)`` runs after every ``run_one``/``run_slot``."""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from fleet.backends.base import Backend
from fleet.core.automation import Automation, BatchAutomation, ContinuousAutomation
from fleet.core.backoff import RetryPolicy
from fleet.core.config import BaseConfig
from fleet.core.context import Context
from fleet.core.errors import Throttled
from fleet.core.outage import OutageLog, is_outage
from fleet.core.records import Reservation
from fleet.core.task import Task
from fleet.worker.cancels import PendingCancels
from fleet.worker.feeder import Feeder
from fleet.worker.leases import AckBatcher, Lease, LeaseKeeper
from fleet.worker.stats import SlotStats, TypeCounters

log = logging.getLogger("fleet.worker.slots")

#: How a finished task ended, reported to ``SlotEnv.on_finished``.
Outcome = Literal["done", "dead", "retry", "released", "stale", "throttled"]
#: Where a slot is; cancelling is only safe while waiting, running or cleaning up.
Phase = Literal["idle", "wait", "run", "cleanup", "settle", "sleep"]
_CANCELLABLE: frozenset[str] = frozenset({"wait", "run", "cleanup", "sleep"})
#: A continuous run shorter than this counts towards the respawn backoff.
SHORT_RUN_SECONDS = 30.0
#: How long a suspect task (one lost unstarted with a worker before) runs alone
#: among its type's suspects on a worker before the next one may start.
SUSPECT_PROBATION_SECONDS = 1.0
#: After a backend outage, a respawned ``run_slot`` that runs this long without
#: raising counts as "backend back" (longer than a connect timeout, so a run
#: still waiting to fail does not count).
SETTLED_SECONDS = 5.0


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
        on_finished: Called with ``(task_id, outcome)`` after a task is settled.
        cancels: Cancel requests of tasks no slot ran yet (checked before a run).
        outages: The type's view of the process's backend outages (one line per
            outage of the process, not one per slot and retry).
        suspects: Held by the one suspect task starting (see ``BatchSlot._start_suspect``).
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
    on_finished: Callable[[str, Outcome], None] | None = None
    cancels: PendingCancels = field(default_factory=PendingCancels)
    has_cleanup: bool = True
    outages: OutageLog = field(default_factory=lambda: OutageLog(log))
    suspects: asyncio.Lock = field(default_factory=asyncio.Lock)

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
        self.started_at = time.time()
        self.stats = SlotStats(slot=ctx.slot_id, started_at=self.started_at, metrics=ctx.metrics)
        self.stopping = False
        self.task: asyncio.Task[None] | None = None
        self.phase: Phase = "idle"
        self.running_task_id: str | None = None
        self._cancel_reason: str | None = None
        # Outage components, shared by every slot of the type through env.outages.
        self._cleaning = f"{env.automation_type}: cleanup"
        self._settling = f"{env.automation_type}: settling tasks"

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

    def cancel_task(self, task_id: str) -> bool:
        """Cancel ``run_one`` if it is running ``task_id`` (the task is then acked
        as cancelled). True if it was."""
        if self.running_task_id != task_id or self.phase != "run":
            return False
        return self._cancel("task")

    def _lease_lost(self, task_id: str, attempt: int) -> None:
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

    def _take_cancel(self) -> str | None:
        """Consume our own cancellation request (None: someone else cancelled us)."""
        reason, self._cancel_reason = self._cancel_reason, None
        if reason is not None:
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
        return reason

    async def _cleanup(self) -> None:
        if not self.env.has_cleanup:
            return  # the base hook does nothing: skip the call on the hot path
        self.phase = "cleanup"
        try:
            await self.env.automation.cleanup(self.ctx)
            self._cleaned()
        except asyncio.CancelledError:
            if self._take_cancel() is None:
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

    async def _main(self) -> None:
        raise NotImplementedError


class BatchSlot(Slot):
    """Reserve → validate → ``run_one`` → cleanup → ack / nack, until stopped."""

    async def _main(self) -> None:
        feeder = self.env.feeder
        assert feeder is not None
        while not self.stopping:
            self.phase = "wait"
            try:
                res = await feeder.get()
            except asyncio.CancelledError:
                if self._take_cancel() is None:
                    raise
                break
            finally:
                self.phase = "idle"
            if res is None:
                break
            await self._handle(res)
        self.phase = "idle"

    async def _handle(self, res: Reservation) -> None:
        env = self.env
        automation = env.automation
        assert isinstance(automation, BatchAutomation)
        body = res.body
        if env.cancels.take(body.id):
            # Cancelled after the reserve, before this slot took it: never run it.
            self.phase = "settle"
            self.ctx.logger.info("task %s cancelled before it started", body.id)
            assert env.acker is not None
            env.acker.ack(body.id, res.token)
            env.counters.completed += 1
            self.stats.completed += 1
            self._finished(body.id, "done")
            return
        model: type[BaseModel] = type(automation).TaskPayload
        try:
            payload = model.model_validate(body.payload)
        except ValidationError as exc:
            self.phase = "settle"
            invalid = f"invalid payload for {env.automation_type}: {exc}"
            await self._nack(res, invalid, None, dead=True)
            return
        config = env.config()
        task: Task[Any] = Task(
            id=body.id,
            payload=payload,
            automation_type=env.automation_type,
            attempt=body.attempt,
            max_attempts=body.max_attempts or config.max_attempts,
            priority=body.priority,
            enqueued_at=body.enqueued_at,
            group=body.group,
        )
        keeper = env.keeper
        assert keeper is not None
        # The start mark goes out with the keeper's next batch; no waiting, except
        # for a suspect (lost unstarted with a worker before, see _start_suspect).
        suspect = body.refunds > 0
        lease = keeper.track(
            body.id,
            res.token,
            config.visibility_seconds,
            self.cancel_task,
            lambda task_id: self._lease_lost(task_id, body.attempt),
            started=not suspect,
        )
        gate: Callable[[], None] | None = None
        if suspect:
            gate = await self._start_suspect(lease)
            if gate is None:
                keeper.untrack(body.id, res.token)
                self.phase = "settle"
                if lease.lost:
                    self.ctx.logger.warning("task %s: lease lost before it started", body.id)
                    self._finished(body.id, "stale")
                else:
                    await self._release(res)  # the slot was stopped while it waited
                return
        self.stats.busy = True
        self.running_task_id = body.id
        self.phase = "run"
        outcome = "ok"
        error: str | None = None
        tb: str | None = None
        retry_after = 0.0
        awaits_ack = False
        started = time.perf_counter()
        try:
            try:
                await self.ctx.proxy.ensure()  # a healthy proxy, a place on it
                await automation.run_one(task, self.ctx)
            except asyncio.CancelledError:
                reason = self._take_cancel()
                if reason is None:
                    raise  # not ours (the loop is going away): the lease runs out
                if reason == "task":
                    outcome = "cancelled"
                elif reason == "lost":
                    outcome = "lost"  # a zombie: the task is another lease's now
                else:
                    outcome = "release"
            except Throttled as exc:
                outcome = "throttled"
                retry_after = exc.retry_after
            except Exception as exc:
                outcome = "failed"
                error = f"{type(exc).__name__}: {exc}"
                tb = traceback.format_exc()
            finally:
                self.running_task_id = None
            if outcome == "ok" or outcome == "failed":  # cancelled runs say nothing of speed
                env.counters.durations.observe(time.perf_counter() - started)
            await self._cleanup()
            awaits_ack = outcome in ("ok", "cancelled")
        finally:
            if awaits_ack and not lease.lost:
                # Renewed until its ack lands: a backend outage that delays the ack
                # past the lease would otherwise hand the finished task out again.
                keeper.hold_for_ack(res.token)
            else:
                keeper.untrack(body.id, res.token)
            self.stats.busy = False
            await self.ctx.proxy.release()  # its place on the proxy, until the next task
            if gate is not None:
                gate()
        if outcome == "cancelled":
            self.ctx.logger.info("task %s cancelled while running", body.id)
        self.phase = "settle"
        if lease.lost:
            # Neither ack nor nack: the stale token would be refused anyway, and
            # the task's fate is up to the attempt that holds it now.
            self._finished(body.id, "stale")
        elif outcome in ("ok", "cancelled"):
            assert env.acker is not None
            env.acker.ack(body.id, res.token)
            env.counters.completed += 1
            self.stats.completed += 1
            self._finished(body.id, "done")
        elif outcome == "release":
            await self._release(res)
        elif outcome == "throttled":
            env.counters.throttled += 1
            await self._throttle(res, retry_after)
        else:
            env.counters.failed += 1
            self.stats.failed += 1
            await self._nack(res, error, tb, dead=False)

    async def _start_suspect(self, lease: Lease) -> Callable[[], None] | None:
        """Start a suspect: a task lost unstarted with a worker before
        (``refunds > 0``). It may be a task that kills its process at once, before
        its start mark leaves, which a sweep cannot tell from the innocent tasks
        lost beside it. So it starts only once the backend has its mark (one round
        trip, on this rare path only): if it kills the process again, the loss is
        charged to it. And it starts alone among its type's suspects on this
        worker: the others wait, unmarked, until it ends or has run
        ``SUSPECT_PROBATION_SECONDS``, so its death is not charged to them.

        Returns the gate's release (call it once the attempt is over), or None if
        the task must not run: its lease was lost (``lease.lost``), or the slot was
        stopped while it waited (the caller gives the task back).
        """
        env = self.env
        assert env.keeper is not None
        self.phase = "wait"
        try:
            await env.suspects.acquire()
        except asyncio.CancelledError:
            if self._take_cancel() is None:
                raise
            return None
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                env.suspects.release()

        try:
            marked = await env.keeper.mark_confirmed(lease)
        except asyncio.CancelledError:
            release()
            if self._take_cancel() is None:
                raise
            return None
        if marked is False:
            release()
            return None
        if marked is None:
            self.ctx.logger.warning(
                "task %s: its start mark was not confirmed in time; running it anyway",
                lease.task_id,
            )
        asyncio.get_running_loop().call_later(SUSPECT_PROBATION_SECONDS, release)
        return release

    async def _nack(
        self, res: Reservation, error: str | None, tb: str | None, *, dead: bool
    ) -> None:
        env = self.env
        body = res.body
        delay = 0.0 if dead else env.policy.delay(body.attempt)
        try:
            result = await env.backend.nack(
                env.automation_type,
                body.id,
                res.token,
                delay_seconds=delay,
                error=error,
                traceback=tb,
                dead=dead,
            )
        except Exception as exc:
            # The lease runs out and the sweeper re-queues the task: not lost.
            if is_outage(exc):
                self.env.outages.failed(self._settling, exc, logger=self.ctx.logger)
            else:
                self.ctx.logger.warning("could not fail task %s: %s", body.id, exc)
            return
        self.env.outages.recovered(self._settling, logger=self.ctx.logger)
        if result == "dead":
            env.counters.dead += 1
            self.ctx.logger.error(
                "task %s dead-lettered after attempt %d: %s", body.id, body.attempt, error
            )
            self._finished(body.id, "dead")
        elif result == "retry":
            env.counters.retried += 1
            self.ctx.logger.warning(
                "task %s attempt %d failed (%s); retry in %.2fs",
                body.id,
                body.attempt,
                error,
                delay,
            )
            self._finished(body.id, "retry")
        else:
            self._finished(body.id, "stale")

    async def _throttle(self, res: Reservation, retry_after: float) -> None:
        """``Throttled`` from ``run_one``: the task goes back uncharged and its group
        (or, without one, the task) waits ``retry_after``, fleet-wide."""
        body = res.body
        try:
            ok = await self.env.backend.throttle(
                self.env.automation_type, body.id, res.token, retry_after=retry_after
            )
        except Exception as exc:
            # The lease runs out and the sweeper re-queues the task: not lost.
            if is_outage(exc):
                self.env.outages.failed(self._settling, exc, logger=self.ctx.logger)
            else:
                self.ctx.logger.warning("could not throttle task %s: %s", body.id, exc)
            return
        self.env.outages.recovered(self._settling, logger=self.ctx.logger)
        if not ok:
            self._finished(body.id, "stale")
            return
        held = f"group {body.group!r}" if body.group is not None else "the task"
        self.ctx.logger.info(
            "task %s throttled: %s waits %.1fs (no attempt charged)", body.id, held, retry_after
        )
        self._finished(body.id, "throttled")

    async def _release(self, res: Reservation) -> None:
        try:
            await self.env.backend.release(self.env.automation_type, res.body.id, res.token)
        except Exception as exc:
            if is_outage(exc):
                self.env.outages.failed(self._settling, exc, logger=self.ctx.logger)
            else:
                self.ctx.logger.warning("could not give back task %s: %s", res.body.id, exc)
            return
        self.env.outages.recovered(self._settling, logger=self.ctx.logger)
        self._finished(res.body.id, "released")

    def _finished(self, task_id: str, outcome: Outcome) -> None:
        if self.env.on_finished is not None:
            self.env.on_finished(task_id, outcome)


class ContinuousSlot(Slot):
    """``run_slot`` → cleanup, respawned with backoff until the slot stops.

    ``run_slot`` and ``cleanup`` report an outage as one component, "<type>:
    slots", which only a lasting run declares over: after the outage a healthy
    ``run_slot`` may run for ever, so no later cleanup would say it was back.
    """

    def __init__(self, env: SlotEnv, ctx: Context[Any]) -> None:
        super().__init__(env, ctx)
        self._running = self._cleaning = f"{env.automation_type}: slots"

    def _cleaned(self) -> None:
        # A cleanup that never touches the backend returns even while it is down.
        pass

    async def _main(self) -> None:
        automation = self.env.automation
        assert isinstance(automation, ContinuousAutomation)
        short_runs = 0
        while not self.stopping:
            started = time.monotonic()
            self.stats.busy = True
            self.phase = "run"
            settled = self._watch_recovery()
            try:
                await self.ctx.proxy.ensure()
                await automation.run_slot(self.ctx)
                self.stats.completed += 1
                self.env.outages.recovered(self._running, certain=False, logger=self.ctx.logger)
                if not self.stopping:
                    self.ctx.logger.warning("run_slot returned; respawning it")
            except asyncio.CancelledError:
                if self._take_cancel() is None:
                    raise
            except Exception as exc:
                self.stats.failed += 1
                self.env.counters.failed += 1
                if is_outage(exc):
                    # The backend is down: one line per outage, not a traceback per respawn.
                    self.env.outages.failed(
                        self._running, exc, hint="respawning it", logger=self.ctx.logger
                    )
                else:
                    self.ctx.logger.exception("run_slot raised; respawning it")
            finally:
                if settled is not None:
                    settled.cancel()
                await self.ctx.proxy.release()
            await self._cleanup()
            self.stats.busy = False
            if self.stopping:
                break
            short = time.monotonic() - started < SHORT_RUN_SECONDS
            short_runs = short_runs + 1 if short else 1
            self.phase = "sleep"
            try:
                await asyncio.sleep(self.env.policy.delay(short_runs))
            except asyncio.CancelledError:
                if self._take_cancel() is None:
                    raise
        self.phase = "idle"

    def _watch_recovery(self) -> asyncio.TimerHandle | None:
        """While the type's slots are in an outage: a timer that declares it over
        once this run has lasted ``SETTLED_SECONDS`` (a healthy ``run_slot`` may
        never return, so its return cannot be what tells)."""
        outages = self.env.outages
        if not outages.is_down(self._running):
            return None
        # A run that lasted proves nothing of the backend if it never called it: the
        # process's outage ends here only if no other loop still fails.
        return asyncio.get_running_loop().call_later(
            SETTLED_SECONDS,
            lambda: outages.recovered(self._running, certain=False, logger=self.ctx.logger),
        )
