"""Per-slot and per-type counters, and the stats frame of docs/protocol.md."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fleet.core.metrics import Histogram, Metrics, merge_snapshots


@dataclass(slots=True)
class SlotStats:
    """Counters of one slot (its current incarnation keeps its ``started_at``).

    Attributes:
        slot: The slot id.
        started_at: When the slot started (unix seconds).
        busy: A task (or ``run_slot``) is running right now.
        completed: Tasks acked (continuous: ``run_slot`` runs that returned).
        failed: Tasks that raised (continuous: ``run_slot`` runs that raised).
        metrics: The slot's ``ctx.metrics``.
    """

    slot: int
    started_at: float
    busy: bool = False
    completed: int = 0
    failed: int = 0
    metrics: Metrics = field(default_factory=Metrics)

    def to_dict(self) -> dict[str, Any]:
        return {
            "slot": self.slot,
            "busy": self.busy,
            "completed": self.completed,
            "failed": self.failed,
            "started_at": self.started_at,
        }


@dataclass(slots=True)
class TypeCounters:
    """Totals of one type in this worker since it started.

    Attributes:
        completed: Tasks finished (acked).
        failed: Attempts that raised.
        dead: Tasks this worker dead-lettered.
        retried: Failed attempts scheduled for a retry.
        throttled: Attempts that raised ``Throttled`` (given back uncharged).
        zombies_cancelled: Attempts cancelled while running because their lease
            was lost (the task had been handed to another worker).
        timed_out: Attempts cancelled past their time limit (``timeout_seconds``).
        slots_abandoned: Slots given up because their ``run_one`` ignored the
            cancel of its time limit (or another cancel) for the grace period.
        durations: How long each ``run_one`` that returned or raised took.
    """

    completed: int = 0
    failed: int = 0
    dead: int = 0
    retried: int = 0
    throttled: int = 0
    zombies_cancelled: int = 0
    timed_out: int = 0
    slots_abandoned: int = 0
    durations: Histogram = field(default_factory=Histogram)


class RateMeter:
    """Completed tasks per second between two heartbeats."""

    def __init__(self, now: float, count: int = 0) -> None:
        self._t = now
        self._count = count
        self.per_second = 0.0

    def update(self, now: float, count: int) -> float:
        """Record the total ``count`` at ``now``; returns the rate since the last call."""
        elapsed = now - self._t
        if elapsed > 0:
            self.per_second = max(count - self._count, 0) / elapsed
            self._t, self._count = now, count
        return self.per_second


def stats_frame(
    *,
    ts: float,
    slots: Iterable[SlotStats],
    counters: TypeCounters,
    per_second: float,
    cpu_percent: float,
    rss_bytes: int,
    retired_metrics: dict[str, Any] | None = None,
    browser_pools: Iterable[dict[str, Any]] = (),
) -> dict[str, Any]:
    """Build the JSON stats frame written with ``worker_put_stats``.

    Args:
        ts: The frame's time.
        slots: Every live slot's counters.
        counters: The type's totals.
        per_second: Completed tasks per second since the previous frame.
        cpu_percent: Process CPU percent since the previous frame.
        rss_bytes: Process resident memory.
        retired_metrics: Metrics of slots that have ended (kept so totals never drop).
        browser_pools: ``BrowserPool.stats()`` of each pool the type's slots use.

    Returns:
        ``{ts, slots: {busy, total}, tasks: {...}, cpu_percent, rss_bytes, metrics,
        slot_stats: [...]}``, plus ``task_duration`` once a ``run_one`` has finished
        and ``browser_pools: [{engine, size, warm, in_use, retired, crashed,
        launch_seconds_avg, ...}]`` for a type that declares ``Browser``.
    """
    live = sorted(slots, key=lambda s: s.slot)
    snaps = [s.metrics.snapshot() for s in live]
    if retired_metrics:
        snaps.insert(0, retired_metrics)
    frame: dict[str, Any] = {
        "ts": ts,
        "slots": {"busy": sum(1 for s in live if s.busy), "total": len(live)},
        "tasks": {
            "completed": counters.completed,
            "failed": counters.failed,
            "dead": counters.dead,
            "retried": counters.retried,
            "throttled": counters.throttled,
            "zombies_cancelled": counters.zombies_cancelled,
            "timed_out": counters.timed_out,
            "slots_abandoned": counters.slots_abandoned,
            "per_second": round(per_second, 3),
        },
        "cpu_percent": cpu_percent,
        "rss_bytes": rss_bytes,
        "metrics": merge_snapshots(snaps),
        "slot_stats": [s.to_dict() for s in live],
    }
    if counters.durations.count:
        frame["task_duration"] = counters.durations.to_dict()
    pools = list(browser_pools)
    if pools:
        frame["browser_pools"] = pools
    return frame
