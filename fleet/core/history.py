"""Per-type history: the rules every backend keeps it by, as pure functions.

A type's history is a series of buckets, one per minute (kept
:data:`MINUTE_KEEP_SECONDS`) and one per hour (kept :data:`HOUR_KEEP_SECONDS`).
Each bucket is a vector of :data:`VECTOR_LEN` integers: the :data:`COUNTERS`
(what happened to the type's tasks in that bucket) followed by one count per
bucket of :data:`fleet.core.metrics.BUCKETS` (how long the ``run_one`` calls that
ended in it took), from which :func:`percentile` answers p50 and p95.

A record takes the type's *cumulative* totals (its queue counters, read inside the
backend's atomic step, and what the workers report: attempts timed out and the
run-time histogram), subtracts the totals of the previous record stored beside the
buckets (:func:`delta`), and adds the difference to the current minute and hour.
Two masters recording at once therefore never count anything twice. A total that
went down (a purged type, a worker that restarted or left) counts 0, and the first
record of a type only sets the baseline (:func:`delta` of no previous totals).

Memory and SQLite call these functions; ``fleet/backends/redis/lua/history_record.lua``
is their only other copy, held to them by ``tests/conformance/test_history_rules.py``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from fleet.core.metrics import BUCKETS

#: The queue counters a bucket counts, in vector order (``QueueCounters`` names).
QUEUE_COUNTERS: tuple[str, ...] = (
    "submitted",
    "completed",
    "failed",
    "dead",
    "expired",
    "throttled",
    "cancelled",
)
#: Every counter of a bucket, in vector order: the queue's, then the workers' timed out.
COUNTERS: tuple[str, ...] = (*QUEUE_COUNTERS, "timed_out")
#: Integers in one bucket (and in one stored snapshot of totals).
VECTOR_LEN = len(COUNTERS) + len(BUCKETS)

MINUTE = 60
HOUR = 3600
#: How long a minute bucket is kept (48 hours), and an hour bucket (30 days).
MINUTE_KEEP_SECONDS = 48 * HOUR
HOUR_KEEP_SECONDS = 30 * 24 * HOUR

Window = Literal["1h", "24h", "30d"]


@dataclass(frozen=True, slots=True)
class WindowSpec:
    """How one window is answered: its length, the width of each point, and the
    resolution of the stored buckets summed into a point (:data:`MINUTE` or :data:`HOUR`)."""

    seconds: int
    step: int
    resolution: int


#: The windows ``read`` answers. 24h sums minute buckets into 15-minute points
#: (96 points, instead of 1,440 too narrow to read on a chart).
WINDOWS: dict[str, WindowSpec] = {
    "1h": WindowSpec(HOUR, MINUTE, MINUTE),
    "24h": WindowSpec(24 * HOUR, 15 * MINUTE, MINUTE),
    "30d": WindowSpec(30 * 24 * HOUR, HOUR, HOUR),
}


@dataclass(frozen=True, slots=True)
class Reported:
    """What the live workers of a type report, summed over them (the master reads it
    from their stats frames): attempts cancelled past their time limit, and the run-time
    histogram (one count per bucket of :data:`~fleet.core.metrics.BUCKETS`; empty if no
    worker reported one). Both are totals since each worker started."""

    timed_out: int = 0
    durations: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class HistoryPoint:
    """One point of a window: what happened from ``t`` (Unix seconds, the point's start)
    for ``step_seconds``, and the run-time percentiles (seconds; None without runs)."""

    t: int
    submitted: int = 0
    completed: int = 0
    failed: int = 0
    dead: int = 0
    expired: int = 0
    throttled: int = 0
    cancelled: int = 0
    timed_out: int = 0
    p50: float | None = None
    p95: float | None = None


@dataclass(frozen=True, slots=True)
class Quantile:
    """A run-time percentile read from the histogram: ``value`` interpolated inside the
    bucket ``[lower, upper]`` that holds it (``upper`` None: the open last bucket).
    ``exact`` only when the bucket is a single point, which it never is: the answer is
    an estimate, and ``lower``/``upper`` bound the true value."""

    value: float
    lower: float
    upper: float | None
    exact: bool = False


@dataclass(frozen=True, slots=True)
class HistorySummary:
    """The whole window at once: every counter summed, and the figures people read off
    it. The same stored buckets give the same summary in every window that holds them.

    Attributes:
        attempts: Attempts that ended: completed + failed + dead (each counted once;
            ``timed_out`` are among the failed and dead, not added to them).
        failure_rate: (failed + dead) / attempts, None without attempts.
        p50, p95: The run-time percentiles of the window, with their bucket.
        runs: How many run times the histogram holds.
    """

    counts: dict[str, int]
    attempts: int
    failure_rate: float | None
    p50: Quantile | None
    p95: Quantile | None
    runs: int


@dataclass(frozen=True, slots=True)
class HistorySeries:
    """A window of a type's history: every point from oldest to newest (the last one is
    the step still running), zeros where nothing happened; ``summary`` the window whole."""

    automation_type: str
    window: str
    step_seconds: int
    points: list[HistoryPoint] = field(default_factory=list)
    summary: HistorySummary | None = None


def totals(counters: Mapping[str, int], reported: Reported) -> list[int]:
    """The vector of a type's cumulative totals: ``counters`` (queue counter name ->
    total; missing ones are 0), then ``reported``'s timed out and histogram (missing
    buckets are 0)."""
    out = [int(counters.get(name, 0)) for name in QUEUE_COUNTERS]
    out.append(int(reported.timed_out))
    hist = list(reported.durations[: len(BUCKETS)])
    out += [int(x) for x in hist] + [0] * (len(BUCKETS) - len(hist))
    return out


def delta(last: Sequence[int] | None, current: Sequence[int]) -> list[int]:
    """What happened between two records: ``current - last`` element by element, a
    negative difference (a total that was reset) counting 0. Without ``last`` (the
    type's first record, or one stored in another layout) nothing is counted: the
    record only sets the baseline."""
    if last is None or len(last) != len(current):
        return [0] * len(current)
    return [max(int(c) - int(p), 0) for c, p in zip(current, last, strict=True)]


def add(into: Sequence[int] | None, more: Sequence[int]) -> list[int]:
    """Two bucket vectors summed (``into`` None: ``more`` alone)."""
    if into is None or len(into) != len(more):
        return [int(x) for x in more]
    return [int(a) + int(b) for a, b in zip(into, more, strict=True)]


def bucket_start(t: float, resolution: int) -> int:
    """The start of the bucket of width ``resolution`` that holds time ``t``."""
    return math.floor(t / resolution) * resolution


def expires_at(start: int, resolution: int) -> int:
    """When a bucket stops being kept: minutes :data:`MINUTE_KEEP_SECONDS`, hours
    :data:`HOUR_KEEP_SECONDS` after their start."""
    keep = MINUTE_KEEP_SECONDS if resolution == MINUTE else HOUR_KEEP_SECONDS
    return start + keep


def kept(start: int, resolution: int, now: float) -> bool:
    """Whether a bucket is still kept at ``now`` (trimming drops the others)."""
    return expires_at(start, resolution) > now


def encode(values: Iterable[int]) -> str:
    """A vector as stored: decimal integers joined by commas (what the Lua writes)."""
    return ",".join(str(int(v)) for v in values)


def decode(text: str | bytes | None) -> list[int] | None:
    """A stored vector back, or None if absent or unreadable."""
    if text is None:
        return None
    if isinstance(text, bytes):
        text = text.decode("ascii", "replace")
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        return None


def percentile(counts: Sequence[int], q: float) -> float | None:
    """The ``q`` quantile (0..1) of the observations counted per bucket of
    :data:`~fleet.core.metrics.BUCKETS`, interpolated linearly inside the bucket that
    holds it (as Prometheus' ``histogram_quantile``; the first bucket starts at 0, and
    the last, unbounded one answers its lower bound). None without observations."""
    total = sum(counts)
    if total <= 0:
        return None
    rank = q * total
    seen = 0
    for i, n in enumerate(counts):
        if n <= 0:
            continue
        if seen + n >= rank:
            lower = 0.0 if i == 0 else float(BUCKETS[i - 1])
            upper = float(BUCKETS[i])
            if math.isinf(upper):
                return lower
            return lower + (upper - lower) * max(rank - seen, 0.0) / n
        seen += n
    return float(BUCKETS[-2])


def quantile(counts: Sequence[int], q: float) -> Quantile | None:
    """:func:`percentile` with the bounds of the bucket it was read from."""
    value = percentile(counts, q)
    if value is None:
        return None
    rank, seen = q * sum(counts), 0
    for i, n in enumerate(counts):
        if n > 0 and seen + n >= rank:
            upper = float(BUCKETS[i])
            lower = 0.0 if i == 0 else float(BUCKETS[i - 1])
            return Quantile(round(value, 6), lower, None if math.isinf(upper) else upper)
        seen += n
    return Quantile(round(value, 6), float(BUCKETS[-2]), None)


def summarize(vectors: Iterable[Sequence[int]]) -> HistorySummary:
    """The summary of the buckets of a window (each a :data:`VECTOR_LEN` vector)."""
    total: list[int] | None = None
    for v in vectors:
        if len(v) == VECTOR_LEN:
            total = add(total, v)
    total = total or [0] * VECTOR_LEN
    counts = dict(zip(COUNTERS, total, strict=False))
    hist = total[len(COUNTERS) :]
    attempts = counts["completed"] + counts["failed"] + counts["dead"]
    failed = counts["failed"] + counts["dead"]
    return HistorySummary(
        counts=counts,
        attempts=attempts,
        failure_rate=round(failed / attempts, 6) if attempts else None,
        p50=quantile(hist, 0.5),
        p95=quantile(hist, 0.95),
        runs=sum(hist),
    )


def window_range(window: str, now: float) -> tuple[int, int, WindowSpec]:
    """The first point's start, the end (exclusive) of the last point, and the spec of
    ``window`` at ``now``: the last point is the one still running.

    Raises:
        KeyError: Not a window of :data:`WINDOWS`.
    """
    spec = WINDOWS[window]
    end = bucket_start(now, spec.step) + spec.step
    return end - spec.seconds, end, spec


def points(
    automation_type: str, window: str, now: float, buckets: Mapping[int, Sequence[int]]
) -> HistorySeries:
    """The series of ``window`` at ``now`` from the stored buckets of its resolution
    (bucket start -> vector); buckets outside the window are left out.

    Raises:
        KeyError: Not a window of :data:`WINDOWS`.
    """
    first, end, spec = window_range(window, now)
    sums: dict[int, list[int]] = {}
    for start, vector in buckets.items():
        if first <= start < end and len(vector) == VECTOR_LEN:
            step = bucket_start(start, spec.step)
            sums[step] = add(sums.get(step), vector)
    series = HistorySeries(automation_type, window, spec.step, summary=summarize(sums.values()))
    for t in range(first, end, spec.step):
        v = sums.get(t)
        if v is None:
            series.points.append(HistoryPoint(t))
            continue
        hist = v[len(COUNTERS) :]
        counts = dict(zip(COUNTERS, v, strict=False))
        series.points.append(
            HistoryPoint(
                t,
                **counts,
                p50=_rounded(percentile(hist, 0.5)),
                p95=_rounded(percentile(hist, 0.95)),
            )
        )
    return series


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def starts_in(window: str, now: float) -> tuple[int, list[int]]:
    """The resolution and the start of every stored bucket ``window`` reads at ``now``
    (what a backend looks up)."""
    first, end, spec = window_range(window, now)
    return spec.resolution, list(range(first, end, spec.resolution))
