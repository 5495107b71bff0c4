"""``ctx.metrics``: slot-local counters, gauges and histograms."""

from __future__ import annotations

import math
from bisect import bisect_left
from typing import Any

#: Histogram bucket upper bounds (seconds-friendly, also fine for counts).
BUCKETS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    math.inf,
)


class Histogram:
    """Counts of observations per bucket of :data:`BUCKETS`, with count and sum.

    Observing is one bisect and three additions, cheap enough to run per task.
    """

    __slots__ = ("buckets", "count", "sum")

    def __init__(self) -> None:
        self.count = 0
        self.sum = 0.0
        self.buckets = [0] * len(BUCKETS)

    def observe(self, value: float) -> None:
        """Record one value (the last bucket, +Inf, takes anything larger)."""
        self.count += 1
        self.sum += value
        # the first bound >= value: a value equal to a bound counts in that bucket
        self.buckets[bisect_left(BUCKETS, value)] += 1

    def to_dict(self) -> dict[str, Any]:
        """``{count, sum, buckets}``, bucket counts per bucket (not cumulative)."""
        return {"count": self.count, "sum": self.sum, "buckets": list(self.buckets)}


def merge_histograms(a: dict[str, Any] | None, b: dict[str, Any]) -> dict[str, Any]:
    """Sum two ``{count, sum, buckets}`` dicts (``a`` may be None)."""
    if a is None:
        return {"count": b["count"], "sum": b["sum"], "buckets": list(b["buckets"])}
    return {
        "count": a["count"] + b["count"],
        "sum": a["sum"] + b["sum"],
        "buckets": [x + y for x, y in zip(a["buckets"], b["buckets"], strict=False)],
    }


class Metrics:
    """Per-slot metrics; the worker merges every slot's :meth:`snapshot` into its
    stats frame, and the master exports them on ``/metrics``."""

    def __init__(self) -> None:
        self.counters: dict[str, float] = {}
        self.gauges: dict[str, float] = {}
        self.histograms: dict[str, Histogram] = {}

    def incr(self, name: str, value: float = 1) -> None:
        """Add ``value`` to the counter ``name``."""
        self.counters[name] = self.counters.get(name, 0) + value

    def set(self, name: str, value: float) -> None:
        """Set the gauge ``name``."""
        self.gauges[name] = float(value)

    def observe(self, name: str, value: float) -> None:
        """Record one observation in the histogram ``name``."""
        h = self.histograms.get(name)
        if h is None:
            h = self.histograms[name] = Histogram()
        h.observe(value)

    def snapshot(self) -> dict[str, Any]:
        """A JSON-able copy (bucket counts are per bucket, not cumulative)."""
        return {
            "counters": dict(self.counters),
            "gauges": dict(self.gauges),
            "histograms": {k: v.to_dict() for k, v in self.histograms.items()},
        }


def merge_snapshots(snaps: list[dict[str, Any]]) -> dict[str, Any]:
    """Sum counters and histograms of several snapshots; gauges: last one wins."""
    counters: dict[str, float] = {}
    gauges: dict[str, float] = {}
    histograms: dict[str, dict[str, Any]] = {}
    for s in snaps:
        for k, v in s.get("counters", {}).items():
            counters[k] = counters.get(k, 0) + v
        for k, v in s.get("gauges", {}).items():
            gauges[k] = float(v)
        for k, h in s.get("histograms", {}).items():
            histograms[k] = merge_histograms(histograms.get(k), h)
    return {"counters": counters, "gauges": gauges, "histograms": histograms}
