"""``ctx.metrics``: slot-local counters, gauges and histograms."""

from __future__ import annotations

import math
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


class Metrics:
    """Per-slot metrics; the worker merges every slot's :meth:`snapshot` into its
    stats frame, and the master exports them on ``/metrics``."""

    def __init__(self) -> None:
        self.counters: dict[str, float] = {}
        self.gauges: dict[str, float] = {}
        self.histograms: dict[str, dict[str, Any]] = {}

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
            h = {"count": 0, "sum": 0.0, "buckets": [0] * len(BUCKETS)}
            self.histograms[name] = h
        h["count"] += 1
        h["sum"] += value
        for i, bound in enumerate(BUCKETS):
            if value <= bound:
                h["buckets"][i] += 1
                break

    def snapshot(self) -> dict[str, Any]:
        """A JSON-able copy (bucket counts are per bucket, not cumulative)."""
        return {
            "counters": dict(self.counters),
            "gauges": dict(self.gauges),
            "histograms": {
                k: {"count": v["count"], "sum": v["sum"], "buckets": list(v["buckets"])}
                for k, v in self.histograms.items()
            },
        }


def merge_snapshots(snaps: list[dict[str, Any]]) -> dict[str, Any]:
    """Sum counters and histograms of several snapshots; gauges: last one wins."""
    out = Metrics()
    for s in snaps:
        for k, v in s.get("counters", {}).items():
            out.incr(k, v)
        for k, v in s.get("gauges", {}).items():
            out.set(k, v)
        for k, h in s.get("histograms", {}).items():
            cur = out.histograms.setdefault(
                k, {"count": 0, "sum": 0.0, "buckets": [0] * len(BUCKETS)}
            )
            cur["count"] += h["count"]
            cur["sum"] += h["sum"]
            cur["buckets"] = [a + b for a, b in zip(cur["buckets"], h["buckets"], strict=False)]
    return out.snapshot()
