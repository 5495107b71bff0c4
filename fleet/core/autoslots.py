"""Adaptive slots (``slots: "auto"``): the thresholds a type's config sets, the
signals a worker measures over one window, and the one rule that turns them into
the type's next slot count (additive increase, multiplicative decrease).

The rule is a pure function (:func:`next_slots`): the worker's sampler
(:mod:`fleet.worker.autoslots`) measures, this decides, so every case is tested
with plain values. See docs/autoscaling.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

#: What held a type's slots where they are (reported in the worker's stats):
#: a signal over its threshold (the type shrank), ``max_slots`` (it would grow but
#: may not), ``idle`` (no work waits for more slots), ``warming`` (not enough
#: finished tasks in the window to judge), or ``growing``.
Limit = Literal[
    "rss",
    "free_memory",
    "throttled",
    "loop_lag",
    "cpu",
    "efficiency",
    "max_slots",
    "idle",
    "warming",
    "growing",
]


class AutoSlotsTuning(BaseModel):
    """Thresholds of adaptive slots (``Config.auto_slots``); read only when
    ``slots`` is ``"auto"``.

    Attributes:
        interval_seconds: Length of one measuring window: one decision per window.
        increase: Slots added per window while every signal is under its threshold
            and tasks wait in the type's queue.
        decrease: Factor the slots are multiplied by when a signal is over (rounded
            down, and always at least one fewer).
        max_loop_lag_seconds: Event-loop lag (how late a timer fires) above which a
            contended type shrinks.
        max_cpu_percent: Process CPU (100 = one core) above which a contended type
            shrinks.
        min_efficiency: A type is contended when its tasks finished per slot fall
            below this fraction of the best it reached (more slots bought no more
            throughput): below it the type shrinks, with loop lag or CPU named when
            they are over.
        max_rss_bytes: Process memory above which every auto type shrinks (None: no
            limit of its own).
        min_free_memory_percent: The machine's available memory below which every
            auto type shrinks.
        max_throttled_rate: Share of the type's finished attempts in the window that
            were ``Throttled``, blocked or timed out above which it shrinks.
        min_finished: Attempts a window needs before efficiency and the throttled
            rate are judged.
    """

    model_config = ConfigDict(extra="forbid")

    interval_seconds: float = Field(default=2.0, ge=0.2, le=600)
    increase: int = Field(default=1, ge=1, le=1_000)
    decrease: float = Field(default=0.7, gt=0, lt=1)
    max_loop_lag_seconds: float = Field(default=0.1, gt=0, le=60)
    max_cpu_percent: float = Field(default=90.0, gt=0, le=100_000)
    min_efficiency: float = Field(default=0.6, gt=0, le=1)
    max_rss_bytes: int | None = Field(default=None, ge=1)
    min_free_memory_percent: float = Field(default=5.0, ge=0, lt=100)
    max_throttled_rate: float = Field(default=0.1, ge=0, le=1)
    min_finished: int = Field(default=3, ge=1, le=1_000_000)


@dataclass(frozen=True, slots=True)
class Signals:
    """What one window measured, for one type.

    Attributes:
        loop_lag: Worst event-loop lag seen in the window, seconds (the process's).
        cpu_percent: Process CPU over the window (100 = one core).
        rss_bytes: Process resident memory at the window's end.
        free_memory_percent: The machine's available memory at the window's end.
        queued: Tasks waiting in the type's queue at the window's end (a continuous
            type: always 1, its slots always have work).
        finished: The type's attempts that ended in the window (any outcome).
        troubled: Of those, the ones throttled, blocked or timed out.
        efficiency: The type's finished attempts per slot in the window, over the
            best per-slot figure it reached (1.0 when unknown).
    """

    loop_lag: float = 0.0
    cpu_percent: float = 0.0
    rss_bytes: int = 0
    free_memory_percent: float = 100.0
    queued: int = 0
    finished: int = 0
    troubled: int = 0
    efficiency: float = 1.0


@dataclass(frozen=True, slots=True)
class SlotDecision:
    """The next slot count and what decided it."""

    slots: int
    limit: Limit


def _shrink(current: int, lo: int, factor: float) -> int:
    return max(lo, min(current - 1, math.floor(current * factor)))


def over_threshold(s: Signals, t: AutoSlotsTuning) -> Limit | None:
    """The first signal over its threshold, or None.

    Memory and the throttled rate are the type's alone or hit every type, so they
    shrink it outright. Loop lag and CPU are the whole process's: they shrink only a
    type that is contended (its per-slot throughput fell), so a CPU-bound type does
    not stop an I/O-bound one beside it from growing.
    """
    if t.max_rss_bytes is not None and s.rss_bytes > t.max_rss_bytes:
        return "rss"
    if s.free_memory_percent < t.min_free_memory_percent:
        return "free_memory"
    judged = s.finished >= t.min_finished
    if judged and s.troubled / s.finished > t.max_throttled_rate:
        return "throttled"
    if judged and s.efficiency < t.min_efficiency:
        if s.loop_lag > t.max_loop_lag_seconds:
            return "loop_lag"
        if s.cpu_percent > t.max_cpu_percent:
            return "cpu"
        return "efficiency"
    return None


def next_slots(current: int, s: Signals, t: AutoSlotsTuning, lo: int, hi: int) -> SlotDecision:
    """The type's slot count for the next window (additive increase,
    multiplicative decrease).

    Args:
        current: Slots it runs now (clamped into ``[lo, hi]`` first: the bounds may
            have just changed).
        s: The window's signals.
        t: The thresholds.
        lo: ``min_slots``.
        hi: ``max_slots``.

    Returns:
        Fewer slots (at least ``lo``) when a signal is over its threshold, named as
        the limit; ``increase`` more (at most ``hi``) when none is and tasks wait;
        else the same count, with why it did not grow.
    """
    current = min(max(current, lo), hi)
    over = over_threshold(s, t)
    if over is not None:
        return SlotDecision(_shrink(current, lo, t.decrease), over)
    if s.queued <= 0:
        return SlotDecision(current, "idle")
    if current >= hi:
        return SlotDecision(current, "max_slots")
    if s.finished < t.min_finished and current > lo:
        # Not enough evidence that the last step paid: wait one more window.
        return SlotDecision(current, "warming")
    return SlotDecision(min(hi, current + t.increase), "growing")
