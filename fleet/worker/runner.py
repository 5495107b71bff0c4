"""One automation type inside a worker: its config, its slots, and the
reconcile step that keeps the slots matching the desired config."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fleet.backends.base import Backend
from fleet.core import clock
from fleet.core.access.router import Access
from fleet.core.automation import Automation, BatchAutomation
from fleet.core.backoff import RetryPolicy
from fleet.core.config import BaseConfig
from fleet.core.context import Context
from fleet.core.errors import ConfigError
from fleet.core.flow import GroupLimits
from fleet.core.metrics import Metrics, merge_snapshots
from fleet.core.proxy import ProxyHandle, ProxyPolicy
from fleet.worker.autoslots import AutoSlots
from fleet.worker.batch import BatchSlot
from fleet.worker.configstate import check_config, config_action, proxy_changed
from fleet.worker.continuous import ContinuousSlot
from fleet.worker.feeder import Feeder
from fleet.worker.leases import AckBatcher, LeaseKeeper
from fleet.worker.outcomes import Finished
from fleet.worker.proxies import build_proxy
from fleet.worker.reconcile import Desired, SlotView, WorkerState, decide, type_state
from fleet.worker.slots import Slot, SlotEnv
from fleet.worker.stats import RateMeter, stats_frame

if TYPE_CHECKING:
    from fleet.browser import BrowserPool  # imported by the worker only when declared

log = logging.getLogger("fleet.worker")

#: Delay before a slot whose loop crashed is started again.
CRASH_RESTART_SECONDS = 1.0


class TypeRunner:
    """Runs the slots of one automation type in this worker.

    Args:
        cls: The automation class.
        backend: The backend.
        worker_id: This worker's id.
        grace: Seconds a stopping continuous slot (or, at shutdown, any slot) gets
            before its ``run_*`` is cancelled.
        policy: Backoff of task retries and of continuous respawns.
        on_finished: Called with ``(task_id, outcome)`` after each settled task.
    """

    def __init__(
        self,
        cls: type[Automation[Any]],
        backend: Backend,
        worker_id: str,
        *,
        grace: float = 30.0,
        policy: RetryPolicy | None = None,
        on_finished: Callable[[str, Finished], None] | None = None,
        browser: BrowserPool | None = None,
    ) -> None:
        self.cls = cls
        #: The pool behind ctx.browser (shared with every type of the same needs).
        self.browser = browser
        self.automation_type = cls.automation_type
        self.backend = backend
        self.worker_id = worker_id
        self.grace = grace
        self.config: BaseConfig | None = None
        self.raw_config: dict[str, Any] = {}
        self.held_gen = 0
        #: (type-wide config, this worker's override) the held config was merged from.
        self.config_sources: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
        #: Set when the backend was found to have lost this worker's config (until the
        #: worker has put back the rest of what it holds, see Worker._heal).
        self.lost_data = False
        self.error: str | None = None
        self.draining = False
        self.shutting_down = False
        self.slots: dict[int, Slot] = {}
        self.changed = asyncio.Event()
        self._retired_metrics: dict[str, Any] | None = None
        self._rate = RateMeter(clock.now())
        self._closed = False
        #: Sizes the slots while the config says ``slots: "auto"`` (else None).
        self.autoslots: AutoSlots | None = None
        self.is_batch = issubclass(cls, BatchAutomation)
        #: Why the type can never run in this process (its class failed to build).
        self.broken: str | None = None
        self.env = SlotEnv(
            automation_type=self.automation_type,
            automation=self._create_automation(),
            backend=backend,
            config=self._current_config,
            policy=policy or RetryPolicy(),
            on_finished=on_finished,
        )
        #: The type's tier routing and verdict counts, shared by its slots (``ctx.access``).
        self.access = Access(backend, self.automation_type, self._current_config)
        if self.is_batch:
            self._add_batch_helpers()
        if cls.Browser is not None and browser is None:
            log.warning(
                "%s declares Browser=%r but the browser pool is not available in this "
                "worker (pip install 'fleet-automation[browser]'); ctx.browser is None",
                self.automation_type,
                cls.Browser,
            )

    def _create_automation(self) -> Automation[Any]:
        """The type's one instance; if its class fails to build, an inert one and
        the type marked ``broken``."""
        try:
            return self.cls()
        except Exception as exc:
            self.broken = f"{self.cls.__name__}() raised {type(exc).__name__}: {exc}"
            log.exception("%s: cannot create the automation", self.automation_type)
            # No slot ever starts while the type is broken.
            return object.__new__(self.cls)

    def _add_batch_helpers(self) -> None:
        """The parts a batch type's slots share: feeder, lease keeper, ack batcher."""
        queues, t = self.backend.queues, self.automation_type
        self.env.feeder = Feeder(queues, t, self._lease_params, prefetch=self._prefetch)
        keeper = self.env.keeper = LeaseKeeper(queues, t, worker_id=self.worker_id)
        self.env.acker = AckBatcher(
            queues,
            t,
            self._on_stale_ack,
            on_settled=lambda task_id, token: keeper.untrack(task_id, token),
            worker_id=self.worker_id,
        )

    # ------------------------------------------------------------------ config
    def _current_config(self) -> BaseConfig:
        if self.config is None:  # slots only exist once a config was applied
            raise RuntimeError(f"{self.automation_type}: no config applied yet")
        return self.config

    def _lease_params(self) -> tuple[float, int]:
        cfg = self._current_config()
        return cfg.visibility_seconds, cfg.max_attempts

    def _prefetch(self) -> int:
        # At most one task ahead per slot, none while draining or stopping.
        if self.draining or self.shutting_down or self.config is None:
            return 0
        return len(self.slots)

    def _on_stale_ack(self, task_id: str) -> None:
        log.warning(
            "%s: ack of task %s was refused: its lease had been lost", self.automation_type, task_id
        )

    def apply(self, raw: dict[str, Any], gen: int) -> bool:
        """Apply a desired config (already known to be newer); True if it validated.

        An invalid config is not applied: the type goes to ERROR (its slots stop)
        until a valid one arrives.
        """
        checked = check_config(self.cls.Config, raw)
        error = checked.error
        new = checked.config
        if new is not None:
            try:
                build_proxy(new, 0)
            except ConfigError as exc:
                error, new = exc.message, None
        if new is None:
            if error != self.error:
                log.error(
                    "%s: config generation %d not applied: %s", self.automation_type, gen, error
                )
            self.error = error
            self.reconcile()
            return False
        old = self.config
        self.config, self.raw_config, self.held_gen, self.error = new, dict(raw), gen, None
        if proxy_changed(old, new):
            for slot in self.slots.values():
                slot.ctx.proxy.discard()  # gives back its place on the old proxy
                slot.ctx.proxy = self._proxy(new, slot.slot_id)
        log.info("%s: applied config generation %d", self.automation_type, gen)
        self.reconcile()
        return True

    async def sync_config(self) -> None:
        """Read this worker's config layers, and merge, write and apply them when they
        are newer than what it holds (docs/protocol.md "Config and generations").

        Raises:
            BackendError: The backend failed (the caller retries later).
        """
        b, t, wid = self.backend, self.automation_type, self.worker_id
        book = await b.configs.book(t, [wid])
        action = config_action(self.held_gen, book.gen(wid))
        if action == "ignore":
            return
        merged, gen = book.merged(wid), book.gen(wid)
        if action == "initialize":
            gen = await b.configs.next_generation(t)
        # Only this worker writes its desired config; one it wrote in an earlier
        # life under a newer generation is stamped again above it.
        if not await b.configs.put_desired(t, wid, merged, gen):
            gen = await b.configs.next_generation(t, floor=gen)
            await b.configs.put_desired(t, wid, merged, gen)
        if self.apply(merged, gen):
            # What the config was made of, to put back if the backend loses it.
            self.config_sources = (book.type_wide, book.override(wid))
            await self.publish_limits()

    async def restore_config(self, stored_gen: int) -> None:
        """Write back what the backend lost of this worker's config: the type-wide
        config and the override it was made of (if they are gone), the merged config
        and its generation, and a generation counter above it (so the next push is
        newer than what this worker runs)."""
        b, t, wid = self.backend, self.automation_type, self.worker_id
        self.lost_data = True
        log.warning(
            "%s: backend holds config generation %d, lower than our %d (it lost data, or "
            "the stored config cannot be read?); writing ours back",
            t,
            stored_gen,
            self.held_gen,
        )
        type_wide, override = self.config_sources
        if type_wide and not await b.configs.get(t):
            await b.configs.set(t, type_wide)
        if override and not await b.configs.get(t, wid):
            await b.configs.set(t, override, wid)
        await b.configs.next_generation(t, floor=self.held_gen)
        await b.configs.put_desired(t, wid, self.raw_config, self.held_gen)
        await self.publish_limits()

    async def publish_limits(self) -> None:
        """Store the fleet-wide fields of the config this worker applied (group limits,
        proxy policy), tagged with its generation, for every reserve and proxy call
        of the fleet to read (a newer generation already stored wins). The master
        stores them with each PATCH; this covers a plugin's own defaults, a first
        start and a backend that lost them."""
        if self.config is None:
            return
        cfg = self.config
        limits = GroupLimits.of(*cfg.group_limits())
        if not self.is_batch:
            limits = GroupLimits()  # no queue: only the proxy policy means anything
        await self.backend.groups.set_defaults(
            self.automation_type, limits, gen=self.held_gen, proxy=ProxyPolicy.of(cfg)
        )

    def set_draining(self, draining: bool) -> None:
        """Drain (stop taking tasks, let running ones finish) or resume."""
        if draining != self.draining:
            log.info("%s: %s", self.automation_type, "draining" if draining else "resuming")
            self.draining = draining
            self.reconcile()

    # ------------------------------------------------------------------ slots
    def _slot_count(self, cfg: BaseConfig | None) -> int:
        if cfg is None:
            return 0
        if isinstance(cfg.slots, int):
            return cfg.slots
        target = self.autoslots.target if self.autoslots is not None else cfg.min_slots
        return min(max(target, cfg.min_slots), cfg.max_slots)  # the bounds may just have moved

    def _follow_auto(self) -> None:
        """Start the adaptive slots' controller when the config turned ``"auto"``
        (and the loop runs), stop it when it no longer is or the type runs no slot."""
        cfg = self.config
        # Not while the type runs no slot (disabled, draining, in ERROR): a controller
        # would grow a count nobody uses. It starts again from min_slots.
        wanted = (
            cfg is not None
            and cfg.auto
            and cfg.enabled
            and not (self._closed or self.draining or self.shutting_down)
            and self.last_error is None
        )
        if wanted and self.autoslots is None:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                return  # started by the next reconcile inside the loop
            self.autoslots = AutoSlots(
                self.automation_type,
                self._current_config,
                self._queued,
                self.env.counters,
                self.reconcile,
            )
            self.autoslots.start()
        elif not wanted and self.autoslots is not None:
            self.autoslots.stop()
            self.autoslots = None

    async def _queued(self) -> int:
        # A continuous type has no queue: its slots always have work.
        if not self.is_batch:
            return 1
        return (await self.backend.queues.depths(self.automation_type)).pending

    def desired(self) -> Desired:
        cfg = self.config
        return Desired(
            slots=self._slot_count(cfg),
            enabled=cfg.enabled if cfg is not None else False,
            recycle_seconds=cfg.recycle_seconds if cfg is not None else None,
            config_ok=cfg is not None and self.last_error is None,
            draining=self.draining,
            shutting_down=self.shutting_down,
        )

    @property
    def last_error(self) -> str | None:
        """What keeps the type in ERROR (None when it can run)."""
        return self.broken or self.error

    def state(self) -> WorkerState:
        return type_state(self.desired(), len(self.slots))

    def start(self) -> None:
        """Start the shared helpers and the slots the config asks for."""
        if self.env.feeder is not None:
            self.env.feeder.start()
        if self.env.keeper is not None:
            self.env.keeper.start()
        if self.env.acker is not None:
            self.env.acker.start()
        self.reconcile()

    def reconcile(self) -> None:
        """Start, stop and recycle slots to match :meth:`desired` (see reconcile.py)."""
        if self._closed:
            return
        self._follow_auto()
        views = [SlotView(s.slot_id, s.started_at, s.stopping) for s in self.slots.values()]
        plan = decide(views, self.desired(), clock.now())
        for sid in (*plan.stop, *plan.recycle):
            self._stop_slot(self.slots[sid])
        for sid in plan.start:
            self._start_slot(sid)
        self.changed.set()

    def _proxy(self, cfg: BaseConfig, slot_id: int) -> ProxyHandle:
        return build_proxy(cfg, slot_id, self.backend.proxies, owner=self.automation_type)

    def _start_slot(self, slot_id: int) -> None:
        cfg = self._current_config()
        ctx: Context[Any] = Context(
            backend=self.backend,
            automation_type=self.automation_type,
            config=self._current_config,
            slot_id=slot_id,
            worker_id=self.worker_id,
            output=self.cls.Output,
            shutdown=asyncio.Event(),
            proxy=self._proxy(cfg, slot_id),
            browser=self.browser,
            logger=logging.getLogger(f"{self.automation_type}.slot.{slot_id}"),
            metrics=Metrics(),
            access=self.access,
        )
        slot: Slot = BatchSlot(self.env, ctx) if self.is_batch else ContinuousSlot(self.env, ctx)
        self.slots[slot_id] = slot
        slot.start().add_done_callback(lambda task: self._slot_done(slot, task))

    def _stop_slot(self, slot: Slot) -> None:
        slot.stop()
        if not self.is_batch:
            # run_slot should return once it sees ctx.shutdown; if it does not
            # within the grace period it is cancelled.
            asyncio.get_running_loop().call_later(self.grace, slot.interrupt)

    def _slot_done(self, slot: Slot, task: asyncio.Task[None]) -> None:
        if self.slots.get(slot.slot_id) is slot:
            del self.slots[slot.slot_id]
        self._retired_metrics = merge_snapshots(
            [s for s in (self._retired_metrics, slot.stats.metrics.snapshot()) if s]
        )
        crashed = not task.cancelled() and task.exception() is not None
        if crashed:
            log.error(
                "%s: slot %d crashed; restarting it",
                self.automation_type,
                slot.slot_id,
                exc_info=task.exception(),
            )
            asyncio.get_running_loop().call_later(CRASH_RESTART_SECONDS, self.reconcile)
        else:
            self.reconcile()
        self.changed.set()

    def cancel_task(self, task_id: str) -> bool:
        """Cancel ``run_one`` of a task running in one of our slots; True if found.

        Otherwise the request is kept for a while: the task may be reserved by
        us and not started yet (see :mod:`fleet.worker.cancels`).
        """
        if any(s.cancel_task(task_id) for s in list(self.slots.values())):
            return True
        if self.is_batch:
            self.env.cancels.add(task_id)
        return False

    async def shutdown(self, grace: float | None = None) -> None:
        """Stop taking tasks, give running ones ``grace`` seconds, then cancel them
        (their tasks go back to the head of their tier), and stop the helpers."""
        grace = self.grace if grace is None else grace
        self.shutting_down = True
        if self.env.feeder is not None:
            await self.env.feeder.close()
        self.reconcile()
        self._closed = True
        self._follow_auto()
        tasks = [s.task for s in self.slots.values() if s.task is not None]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace)
            if pending:
                log.warning(
                    "%s: %d slot(s) still busy after %.0fs; cancelling them",
                    self.automation_type,
                    len(pending),
                    grace,
                )
                for slot in list(self.slots.values()):
                    slot.interrupt()
                await asyncio.wait(pending, timeout=max(grace, 10.0))
        if self.env.acker is not None:
            await self.env.acker.close()
        if self.env.keeper is not None:
            await self.env.keeper.close()
        await self.access.close()
        self.changed.set()

    # ------------------------------------------------------------------ stats
    def stats(self, cpu_percent: float, rss_bytes: int) -> dict[str, Any]:
        """The stats frame of this type (docs/protocol.md)."""
        now = clock.now()
        per_second = self._rate.update(now, self.env.counters.completed)
        frame = stats_frame(
            ts=now,
            slots=[s.stats for s in self.slots.values()],
            counters=self.env.counters,
            per_second=per_second,
            cpu_percent=cpu_percent,
            rss_bytes=rss_bytes,
            retired_metrics=self._retired_metrics,
            browser_pools=[self.browser.stats()] if self.browser is not None else (),
        )
        if self.autoslots is not None:
            frame["autoslots"] = self.autoslots.report()
        return frame
