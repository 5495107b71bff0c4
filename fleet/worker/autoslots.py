"""The worker side of ``slots: "auto"``: one controller per type measures a window
(the process's signals from :mod:`fleet.worker.sampling`, the type's queue
and its outcomes), asks :func:`fleet.core.autoslots.next_slots` for the next
count, and has the runner start or stop slots to match.

Cost: a timer every :data:`TICK` seconds per auto type (the lag measurement), and
per window one read of the queue's depth and a decision; a task pays nothing
(outcomes are read from the type's counters, which every task updates anyway). A
type with a fixed ``slots`` has no controller at all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypedDict

from fleet.core import clock
from fleet.core.autoslots import Limit, Signals, SlotDecision, next_slots
from fleet.core.config import BaseConfig
from fleet.core.errors import BackendError
from fleet.worker.sampling import LagMeter, ProcessProbe
from fleet.worker.stats import TypeCounters

log = logging.getLogger("fleet.worker.autoslots")

#: Seconds between two lag measurements.
TICK = 0.25
#: A type's slot changes are logged at most once per this many seconds.
LOG_EVERY_SECONDS = 60.0
#: The best per-slot throughput fades by this factor each window, so an old record
#: (another task mix, a faster site) does not hold the type down for ever.
BEST_FADE = 0.98
#: Weight of the newest window in the smoothed per-slot throughput.
SMOOTHING = 0.5


class AutoSlotsReport(TypedDict):
    """What a worker's stats frame says of a type's adaptive slots."""

    slots: int
    min_slots: int
    max_slots: int
    limit: Limit
    loop_lag: float
    cpu_percent: float
    rss_bytes: int
    free_memory_percent: float
    queued: int
    troubled_rate: float
    efficiency: float


class AutoSlots:
    """Sizes one type's slots while its config says ``"auto"``.

    Args:
        automation_type: The type (for logs).
        config: The type's current config.
        queued: Reads how many tasks wait in the type's queue.
        counters: The type's totals.
        changed: Called when :attr:`target` changed (the runner reconciles).
    """

    def __init__(
        self,
        automation_type: str,
        config: Callable[[], BaseConfig],
        queued: Callable[[], Awaitable[int]],
        counters: TypeCounters,
        changed: Callable[[], None],
    ) -> None:
        self.automation_type = automation_type
        self._config = config
        self._queued = queued
        self._counters = counters
        self._changed = changed
        cfg = config()
        #: The slot count the runner keeps (starts at min_slots).
        self.target = cfg.min_slots
        self.last = SlotDecision(self.target, "warming")
        self.signals = Signals()
        self._probe = ProcessProbe()
        self._lag = LagMeter(TICK)
        self._best = 0.0
        self._smooth: float | None = None
        self._window_start = clock.now()
        self._seen = self._totals()
        self._logged_at = 0.0
        self._changes = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start measuring (in the running event loop)."""
        if self._task is None:
            name = f"{self.automation_type}.autoslots"
            self._task = asyncio.get_running_loop().create_task(self._loop(), name=name)

    def stop(self) -> None:
        """Stop measuring."""
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def _totals(self) -> tuple[int, int]:
        c = self._counters
        return c.completed + c.failed + c.throttled, c.throttled + c.timed_out

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(TICK)
            self._lag.tick()
            if clock.now() - self._window_start >= self._config().auto_slots.interval_seconds:
                try:
                    queued = await self._queued()
                except BackendError:
                    queued = 0  # cannot tell: hold (the outage is logged where it hurts)
                self.decide(clock.now(), queued)

    def decide(self, now: float, queued: int) -> SlotDecision:
        """Close the window: measure, decide, and tell the runner if the count moved."""
        cfg = self._config()
        t = cfg.auto_slots
        elapsed = max(now - self._window_start, 1e-6)
        finished_total, troubled_total = self._totals()
        finished = finished_total - self._seen[0]
        troubled = troubled_total - self._seen[1]
        per_slot = finished / elapsed / max(self.target, 1)
        judged = queued > 0 and finished >= t.min_finished
        efficiency = 1.0
        if judged:
            # Smoothed over two windows or so: one window's few completions are noisy,
            # and a noisy best would make every later window look inefficient.
            smooth = self._smooth = (
                per_slot
                if self._smooth is None
                else SMOOTHING * per_slot + (1 - SMOOTHING) * self._smooth
            )
            self._best = max(self._best * BEST_FADE, smooth)
            efficiency = smooth / self._best if self._best > 0 else 1.0
        cpu, rss, free = self._probe.read()
        self.signals = Signals(
            loop_lag=self._lag.take(),
            cpu_percent=cpu,
            rss_bytes=rss,
            free_memory_percent=free,
            queued=queued,
            finished=finished,
            troubled=troubled,
            efficiency=efficiency,
        )
        decision = next_slots(self.target, self.signals, t, cfg.min_slots, cfg.max_slots)
        self._window_start, self._seen = now, (finished_total, troubled_total)
        moved = decision.slots != self.target
        self.last, self.target = decision, decision.slots
        if moved:
            self._changes += 1
            self._log(now)
            self._changed()
        return decision

    def _log(self, now: float) -> None:
        # At most one line a minute per type: a type that oscillates must not flood.
        if now - self._logged_at < LOG_EVERY_SECONDS:
            return
        s = self.signals
        log.info(
            "%s: auto slots now %d (%s; %d change(s) since the last line): loop lag %.3fs, "
            "cpu %.0f%%, rss %d MB, free memory %.0f%%, %d queued, efficiency %.2f, "
            "troubled %d of %d",
            self.automation_type,
            self.target,
            self.last.limit,
            self._changes,
            s.loop_lag,
            s.cpu_percent,
            s.rss_bytes // 1_000_000,
            s.free_memory_percent,
            s.queued,
            s.efficiency,
            s.troubled,
            s.finished,
        )
        self._logged_at, self._changes = now, 0

    def report(self) -> AutoSlotsReport:
        """The stats frame's ``autoslots`` part."""
        cfg, s = self._config(), self.signals
        return {
            "slots": self.target,
            "min_slots": cfg.min_slots,
            "max_slots": cfg.max_slots,
            "limit": self.last.limit,
            "loop_lag": round(s.loop_lag, 4),
            "cpu_percent": round(s.cpu_percent, 1),
            "rss_bytes": s.rss_bytes,
            "free_memory_percent": round(s.free_memory_percent, 1),
            "queued": s.queued,
            "troubled_rate": round(s.troubled / s.finished, 3) if s.finished else 0.0,
            "efficiency": round(s.efficiency, 3),
        }
