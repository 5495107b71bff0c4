"""The worker process: registration, heartbeat, config and control events,
the safety-net re-read, and graceful shutdown (docs/protocol.md)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import fleet
from fleet.backends.base import Backend, Subscription
from fleet.core import clock, tracing
from fleet.core.automation import Automation
from fleet.core.backoff import RetryPolicy, backoff_delay
from fleet.core.browser import BrowserNeeds
from fleet.core.cancelling import cancel_and_wait
from fleet.core.catalog import catalog_entry
from fleet.core.errors import BackendError
from fleet.core.logs import bind_fields, reset_fields
from fleet.core.outage import OutageLog, is_outage
from fleet.core.stored import entry_unreadable
from fleet.protocol import (
    CONTROL_NS,
    cancel_topic,
    config_topic,
    control_topic,
    drain_key,
    worker_topic,
)
from fleet.scheduler import ScheduleFirer, sync_declared
from fleet.scheduler.payloads import local_check
from fleet.worker import stalls
from fleet.worker.hardware import ProcessSampler, hardware, host_name
from fleet.worker.identity import IdClaim
from fleet.worker.outcomes import Finished
from fleet.worker.runner import TypeRunner

if TYPE_CHECKING:
    from fleet.browser import BrowserPool  # imported by the worker only when declared

log = logging.getLogger("fleet.worker")

#: How often the desired config and the drain flag are re-read without an event.
RESYNC_SECONDS = 30.0


def stop_if_cancelled(exc: BaseException | None = None) -> None:
    """Raise ``CancelledError`` if this task is being cancelled. A driver can swallow
    the cancel that lands inside a call, or turn it into a connection error (redis-py
    does); a loop must not then go on, or the worker's shutdown waits on it for ever."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError from exc


class Worker:
    """Runs automation types against one backend until :meth:`request_stop`.

    Args:
        backend: A connected backend (the caller closes it).
        classes: The automation classes to run.
        worker_id: This worker's id.
        grace: Seconds running tasks get at shutdown before they are cancelled.
        heartbeat_seconds: Period of state and stats writes.
        resync_seconds: Period of the safety-net config and drain re-read.
        policy: Backoff of task retries and continuous respawns.
        fixed_config: If set, run every type with this config and skip the
            backend's config, registration and heartbeats (``fleet run``).
        on_finished: Called with ``(task_id, outcome)`` after each settled task.
        id_claim: This process's claim on ``worker_id`` (renewed with every heartbeat,
            released at shutdown); None for ``fleet run`` and in-process tests.
        exit_when_idle: Stop (gracefully) once no slot has run a task and no task
            waited in the process for this many seconds (None: never).
    """

    def __init__(
        self,
        backend: Backend,
        classes: Sequence[type[Automation[Any]]],
        worker_id: str | None = None,
        *,
        grace: float = 30.0,
        heartbeat_seconds: float = 5.0,
        resync_seconds: float = RESYNC_SECONDS,
        policy: RetryPolicy | None = None,
        fixed_config: dict[str, Any] | None = None,
        on_finished: Callable[[str, Finished], None] | None = None,
        id_claim: IdClaim | None = None,
        exit_when_idle: float | None = None,
    ) -> None:
        self.backend = backend
        self.exit_when_idle = exit_when_idle
        #: Set when the worker stopped because it had nothing to do.
        self.exited_idle = False
        self.id_claim = id_claim
        self.worker_id = worker_id or host_name()
        self.grace = grace
        self.heartbeat_seconds = heartbeat_seconds
        self.resync_seconds = resync_seconds
        self.fixed_config = fixed_config
        #: One browser pool per distinct BrowserNeeds, shared by the types declaring it.
        self.browsers: dict[BrowserNeeds, BrowserPool] = {}
        self.runners = {
            cls.automation_type: TypeRunner(
                cls,
                backend,
                self.worker_id,
                grace=grace,
                policy=policy,
                on_finished=on_finished,
                browser=self._browser_for(cls.Browser),
            )
            for cls in classes
        }
        self.started_at = clock.now()
        self._hardware = hardware()
        self._sampler = ProcessSampler()
        self._written_state: dict[str, str] = {}
        self._stop = asyncio.Event()
        self._loops: list[asyncio.Task[None]] = []
        self.firer: ScheduleFirer | None = None
        #: Healing and the safety-net re-read take turns: a re-read between a heal's
        #: discovery of a loss and its restoring the drain flag would read it as a resume.
        self._healing = asyncio.Lock()
        #: One line per outage of each loop below, not one per failed retry.
        self._outages = OutageLog(log)

    def _browser_for(self, needs: BrowserNeeds | None) -> BrowserPool | None:
        """The pool for ``needs`` (None without a declaration); a missing engine or
        Playwright shows at warm-up, as every ``acquire`` raising ``BrowserUnavailable``."""
        if needs is None:
            return None
        if needs not in self.browsers:
            try:
                from fleet.browser import BrowserPool
            except ImportError as exc:  # pragma: no cover - psutil is a core dependency
                log.error("browser pool unavailable: %s", exc)
                return None
            self.browsers[needs] = BrowserPool(needs)
        return self.browsers[needs]

    @property
    def standalone(self) -> bool:
        return self.fixed_config is not None

    # ------------------------------------------------------------------ lifecycle
    async def run(self) -> None:
        """Start, run until :meth:`request_stop`, then shut down gracefully."""
        # Every line of this worker's loops and slots (tasks made from here inherit
        # the context) names it in structured logs.
        token = bind_fields(worker_id=self.worker_id)
        tracing.enable()  # with the [otel] extra and somewhere to send spans
        try:
            async with stalls.watching():  # blocking code is caught (fleet.worker.stalls)
                await self.start()
                try:
                    await self._stop.wait()
                finally:
                    await self.shutdown()
        finally:
            reset_fields(token)
            tracing.shutdown()  # the spans still buffered

    @property
    def stop_requested(self) -> asyncio.Event:
        """Set once :meth:`request_stop` was called."""
        return self._stop

    def request_stop(self) -> None:
        """Begin a graceful shutdown (safe to call from a signal handler)."""
        self._stop.set()

    async def start(self) -> None:
        """Register every type, read its config and drain flag, start its slots
        and the background loops. While the backend cannot be reached this
        retries with backoff (until :meth:`request_stop`).

        Raises:
            BackendError: Only if a stop was requested before the backend answered.
        """
        failures = 0
        while True:
            try:
                first = await self._prepare()
                self._outages.recovered("registration")
                break
            except BackendError as exc:
                failures += 1
                delay = backoff_delay(failures, base=0.5, cap=30.0)
                if is_outage(exc):
                    self._outages.failed("registration", exc)
                else:
                    log.warning("backend not ready (%s); retrying in %.1fs", exc, delay)
                if self._stop.is_set():
                    raise
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), delay)
        for pool in self.browsers.values():
            pool.warm()  # browsers launch while the slots start
        for runner in self.runners.values():
            runner.start()
        self._loops.append(asyncio.create_task(self._events_loop(first), name="worker-events"))
        if self.exit_when_idle is not None:
            self._loops.append(asyncio.create_task(self._idle_loop(), name="exit-when-idle"))
        if not self.standalone:
            for runner in self.runners.values():
                with contextlib.suppress(BackendError):
                    await self._write_state(runner, heartbeat=True)
            self._loops.append(asyncio.create_task(self._heartbeat_loop(), name="heartbeat"))
            # Any worker can fire the fleet's schedules: they need no master.
            self.firer = ScheduleFirer(self.backend, f"worker {self.worker_id}", local_check)
            self.firer.start()
            self._loops.append(asyncio.create_task(self._resync_loop(), name="resync"))
            for runner in self.runners.values():
                name = f"state:{runner.automation_type}"
                self._loops.append(asyncio.create_task(self._state_loop(runner), name=name))
        log.info(
            "worker %s running %s",
            self.worker_id,
            ", ".join(f"{t}({r.state()})" for t, r in self.runners.items()),
        )

    async def _prepare(self) -> Subscription:
        for t, runner in self.runners.items():
            if self.standalone:
                if runner.config is None and runner.error is None:
                    runner.apply(dict(self.fixed_config or {}), 0)
                await runner.publish_limits()
            else:
                await self.backend.workers.register(t, self.worker_id, self._hardware)
                await self.backend.catalog.put(t, catalog_entry(runner.cls))
                await sync_declared(self.backend.schedules, {t: runner.cls})
                runner.draining = await self._drain_flag(t)
                await runner.sync_config()
        # Subscribed before start returns, so no event published afterwards is missed.
        return await self.backend.events.subscribe(*self._topics())

    async def shutdown(self) -> None:
        """Drain every type within the grace period, then write state STOPPED."""
        log.info("worker %s stopping (grace %.0fs)", self.worker_id, self.grace)
        if self.firer is not None:
            await self.firer.stop()  # another process takes the schedules over at once
        await asyncio.gather(*(r.shutdown() for r in self.runners.values()))
        for pool in self.browsers.values():
            await pool.close()  # kills every browser process it started
        for task in self._loops:
            task.cancel()
        for task in self._loops:
            await cancel_and_wait(task)
        self._loops.clear()
        if not self.standalone:
            for runner in self.runners.values():
                with contextlib.suppress(BackendError):
                    await self._write_state(runner, heartbeat=True, state="STOPPED")
        if self.id_claim is not None:
            with contextlib.suppress(BackendError):
                await self.id_claim.release(self.backend.kv)
        log.info("worker %s stopped", self.worker_id)

    # ------------------------------------------------------------------ state
    def state_fields(self, runner: TypeRunner, state: str | None = None) -> dict[str, str]:
        """The ``wkr:<type>:<id>:state`` hash of one type."""
        return {
            "state": state or runner.state(),
            "last_seen": f"{clock.now():.3f}",
            "last_error": runner.last_error or "",
            "applied_gen": str(runner.held_gen),
            "slots": str(len(runner.slots)),
            "host": str(self._hardware["host"]),
            "pid": str(os.getpid()),
            "started_at": f"{self.started_at:.3f}",
            "version": fleet.__version__,
        }

    async def _write_state(
        self, runner: TypeRunner, *, heartbeat: bool = False, state: str | None = None
    ) -> bool:
        """Write the type's state if it changed (always on a heartbeat); False when
        there was nothing to write (no backend call was made)."""
        t = runner.automation_type
        fields = self.state_fields(runner, state)
        key = f"{fields['state']}|{fields['last_error']}|{fields['slots']}"
        previous = self._written_state.get(t)
        if not heartbeat and previous == key:
            return False
        await self.backend.workers.set_state(t, self.worker_id, fields)
        self._written_state[t] = key
        if previous is None or previous.split("|", 1)[0] != fields["state"]:
            await self.backend.events.publish(
                worker_topic(t), {"worker_id": self.worker_id, "state": fields["state"]}
            )
        return True

    async def _state_loop(self, runner: TypeRunner) -> None:
        # Writes the state as soon as it changes (slots started/stopped, error).
        while True:
            stop_if_cancelled()  # a cancel a call swallowed (see stop_if_cancelled)
            await runner.changed.wait()
            runner.changed.clear()
            await asyncio.sleep(0.05)  # coalesce a burst of changes into one write
            try:
                if await self._write_state(runner):
                    # Only a write proves the backend answers: a state unchanged since
                    # the outage began writes nothing, and must not say "back".
                    self._outages.recovered("state writes")
            except Exception as exc:
                stop_if_cancelled(exc)
                if is_outage(exc):
                    self._outages.failed("state writes", exc)
                else:
                    log.warning("could not write state of %s: %s", runner.automation_type, exc)

    def activity(self) -> tuple[bool, int]:
        """``(busy, settled)``: busy while a slot runs a task (a continuous slot:
        always) or a reserved task waits in the process for a slot; settled counts
        the attempts that ended, so a task shorter than the look between two looks
        still counts as work."""
        busy, settled = False, 0
        for runner in self.runners.values():
            c = runner.env.counters
            settled += c.completed + c.failed + c.dead + c.throttled
            if any(s.stats.busy for s in runner.slots.values()):
                busy = True
            elif runner.env.feeder is not None and runner.env.feeder.holding:
                busy = True
        return busy, settled

    async def _idle_loop(self) -> None:
        # --exit-when-idle: a look a few times a second; nothing is in flight when it
        # stops, and a task reserved meanwhile is given back by the feeder's close.
        assert self.exit_when_idle is not None
        limit = self.exit_when_idle
        step = min(0.25, max(limit / 4, 0.05))
        idle_since = time.monotonic()
        seen = self.activity()[1]
        while True:
            await asyncio.sleep(step)
            now = time.monotonic()
            busy, settled = self.activity()
            if busy or settled != seen:
                idle_since, seen = now, settled
            elif now - idle_since >= limit:
                log.info("worker %s: nothing to do for %.1fs: exiting", self.worker_id, limit)
                self.exited_idle = True
                self.request_stop()
                return

    async def _heartbeat_loop(self) -> None:
        while True:
            stop_if_cancelled()  # a cancel a call swallowed (see stop_if_cancelled)
            await asyncio.sleep(self.heartbeat_seconds)
            if self.id_claim is not None:
                try:
                    await self.id_claim.renew(self.backend.kv)
                except BackendError:
                    stop_if_cancelled()
            cpu, rss = self._sampler.sample()
            for t, runner in self.runners.items():
                runner.reconcile()  # recycles slots past recycle_seconds
                try:
                    # Registering again is how a forgotten live worker comes back.
                    await self.backend.workers.register(t, self.worker_id, self._hardware)
                    await self._write_state(runner, heartbeat=True)
                    await self.backend.workers.put_stats(t, self.worker_id, runner.stats(cpu, rss))
                    async with self._healing:
                        await self._heal(runner)
                    await self._rewrite_unreadable_entry(runner)
                    self._outages.recovered("heartbeat")
                except Exception as exc:
                    stop_if_cancelled(exc)
                    if is_outage(exc):
                        self._outages.failed("heartbeat", exc)
                    else:
                        log.warning("heartbeat of %s failed: %s", t, exc)

    async def _heal(self, runner: TypeRunner) -> None:
        """Put back what the backend lost (FLUSHALL, a restore from an older backup, a
        fresh Redis at the same address) within one heartbeat: the catalog entry, the
        config and its generation, and a drain flag this worker still obeys. The
        registration and state were just written by the heartbeat itself."""
        t = runner.automation_type
        if runner.held_gen > 0:
            _, gen = await self.backend.configs.desired(t, self.worker_id)
            if gen < runner.held_gen:
                await runner.restore_config(gen)  # sets runner.lost_data
        if await self.backend.catalog.get(t) is None:
            runner.lost_data = True
            log.warning("%s: catalog entry missing (the backend lost data?): publishing it", t)
            await self.backend.catalog.put(t, catalog_entry(runner.cls))
        # Only after a loss: a flag missing otherwise means a resume whose event we missed.
        if runner.lost_data:
            if runner.draining and not await self._drain_flag(t):
                await self.backend.kv.set(CONTROL_NS, drain_key(t, self.worker_id), "true")
            runner.lost_data = False

    async def _rewrite_unreadable_entry(self, runner: TypeRunner) -> None:
        """Publish the type's catalog entry again if the stored one cannot be read
        (docs/operations.md, "Corrupt records"). The rest of this worker's record
        is rewritten by the heartbeat itself (registration, state, stats) and, for
        a config or generation that cannot be read, by :meth:`_heal` (the backend
        answers it as missing)."""
        t = runner.automation_type
        entry = await self.backend.catalog.get(t)
        why = None if entry is None else entry_unreadable(entry)
        if why is not None:
            log.warning("%s: the stored catalog entry cannot be read (%s): publishing it", t, why)
            await self.backend.catalog.put(t, catalog_entry(runner.cls))

    async def _drain_flag(self, automation_type: str) -> bool:
        value = await self.backend.kv.get(CONTROL_NS, drain_key(automation_type, self.worker_id))
        return value == "true"

    async def resync(self) -> None:
        """Re-read every type's desired config and drain flag (the safety net)."""
        for t, runner in self.runners.items():
            try:
                async with self._healing:
                    await self._heal(runner)
                    await runner.sync_config()
                    if runner.lost_data:
                        await self._heal(runner)  # puts the drain flag back
                    else:  # a flag missing now is a resume whose event was missed
                        runner.set_draining(await self._drain_flag(t))
                self._outages.recovered("config re-read")
            except Exception as exc:
                if is_outage(exc):
                    self._outages.failed("config re-read", exc)
                else:
                    log.warning("config re-read of %s failed: %s", t, exc)

    async def _resync_loop(self) -> None:
        while True:
            await asyncio.sleep(self.resync_seconds)
            await self.resync()

    # ------------------------------------------------------------------ events
    def _topics(self) -> list[str]:
        kinds = (cancel_topic,) if self.standalone else (config_topic, control_topic, cancel_topic)
        return [topic(t) for t in self.runners for topic in kinds]

    async def _events_loop(self, first: Subscription) -> None:
        failures = 0
        sub: Subscription | None = first
        while True:
            try:
                if sub is None:
                    sub = await self.backend.events.subscribe(*self._topics())
                async with sub:
                    self._outages.recovered("event subscription")
                    if failures and not self.standalone:
                        await self.resync()  # events may have been missed meanwhile
                    failures = 0
                    async for topic, message in sub:
                        await self._on_event(topic, message)
                sub = None
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                sub = None
                failures += 1
                delay = backoff_delay(failures, base=0.5, cap=30.0)
                if is_outage(exc):
                    self._outages.failed("event subscription", exc)
                else:
                    log.warning("event subscription failed (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)

    async def _on_event(self, topic: str, message: Any) -> None:
        kind, _, t = topic.partition(".")
        runner = self.runners.get(t)
        if runner is None or not isinstance(message, dict):
            return
        target = message.get("worker_id")
        if kind == "cancel":
            task_id = message.get("task_id")
            if isinstance(task_id, str):
                runner.cancel_task(task_id)
            return
        if target not in (None, self.worker_id):
            return
        try:
            if kind == "config":
                gen = message.get("gen")
                if not isinstance(gen, int) or gen > runner.held_gen:
                    await runner.sync_config()
                    self._outages.recovered("event handling")
            elif kind == "control":
                action = message.get("action")
                if action in ("drain", "resume"):
                    runner.set_draining(action == "drain")
        except Exception as exc:
            if is_outage(exc):
                self._outages.failed("event handling", exc)
            else:
                log.warning("handling %s failed: %s", topic, exc)
