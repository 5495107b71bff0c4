"""History (``backend.history``): records add what happened since the last one into
the minute and hour buckets, once, and reads answer every point of a window."""

from __future__ import annotations

import asyncio

import pytest

from fleet.backends.base import Backend
from fleet.core.history import (
    HOUR,
    HOUR_KEEP_SECONDS,
    MINUTE,
    MINUTE_KEEP_SECONDS,
    HistoryPoint,
    Reported,
    bucket_start,
)
from fleet.core.metrics import BUCKETS
from fleet.core.records import now
from tests.conformance.helpers import TYPE, push, reserve_one

NONE = Reported()


def _hist(**at: int) -> tuple[int, ...]:
    """A run-time histogram: bucket index -> count (``b7=3``: three runs in bucket 7)."""
    out = [0] * len(BUCKETS)
    for name, n in at.items():
        out[int(name[1:])] = n
    return tuple(out)


def _at(points: list[HistoryPoint], t: float, step: int) -> HistoryPoint:
    start = bucket_start(t, step)
    found = [p for p in points if p.t == start]
    assert len(found) == 1, (start, [p.t for p in points][-3:])
    return found[0]


async def test_the_first_record_sets_the_baseline_and_then_only_changes_count(
    backend: Backend,
) -> None:
    await push(backend, "a", "b")
    t = now()
    assert await backend.history.record(TYPE, t, NONE) is False
    series = await backend.history.read(TYPE, "1h", t)
    assert all(p == HistoryPoint(p.t) for p in series.points)
    await push(backend, "c", "d", "e")
    r = await reserve_one(backend)
    assert await backend.queues.ack(TYPE, [(r.body.id, r.token)]) == [True]
    r = await reserve_one(backend)
    await backend.queues.nack(TYPE, r.body.id, r.token, delay_seconds=60.0, error="boom")
    assert await backend.history.record(TYPE, t + 1, NONE) is True
    # Nothing happened since: nothing is written, and nothing counts twice.
    assert await backend.history.record(TYPE, t + 2, NONE) is False
    series = await backend.history.read(TYPE, "1h", t + 2)
    assert series.step_seconds == MINUTE and len(series.points) == 60
    point = _at(series.points, t + 1, MINUTE)
    assert (point.submitted, point.completed, point.failed) == (3, 1, 1)
    assert (point.dead, point.expired, point.throttled, point.cancelled) == (0, 0, 0, 0)
    day = await backend.history.read(TYPE, "24h", t + 2)
    assert day.step_seconds == 15 * MINUTE and len(day.points) == 96
    assert _at(day.points, t + 1, 15 * MINUTE).submitted == 3
    month = await backend.history.read(TYPE, "30d", t + 2)
    assert month.step_seconds == HOUR and len(month.points) == 720
    assert _at(month.points, t + 1, HOUR).completed == 1
    assert sum(p.submitted for p in month.points) == 3


async def test_run_times_and_timeouts_come_from_what_the_workers_report(
    backend: Backend,
) -> None:
    t = now() // MINUTE * MINUTE + 1  # t + 1 ... t + 3 in one minute, whenever it runs
    await backend.history.record(TYPE, t, Reported(timed_out=1, durations=_hist(b5=10)))
    # 100 more runs: 50 in (0.1, 0.25], 50 in (1, 2.5]; 2 more timed out.
    got = Reported(timed_out=3, durations=_hist(b5=60, b8=50))
    assert await backend.history.record(TYPE, t + 1, got) is True
    point = _at((await backend.history.read(TYPE, "1h", t + 1)).points, t + 1, MINUTE)
    assert point.timed_out == 2 and point.submitted == 0
    assert point.p50 == pytest.approx(0.25)
    assert point.p95 == pytest.approx(1 + 1.5 * 45 / 50)
    # A worker that left takes its totals with it: what went down counts 0.
    assert await backend.history.record(TYPE, t + 2, Reported(durations=_hist(b5=5))) is False
    assert await backend.history.record(TYPE, t + 3, Reported(durations=_hist(b5=6))) is True
    point = _at((await backend.history.read(TYPE, "1h", t + 3)).points, t + 3, MINUTE)
    assert point.timed_out == 2 and point.p50 is not None


async def test_a_purged_type_counts_nothing_for_its_reset_counters(backend: Backend) -> None:
    await push(backend, "a", "b")
    t = now()
    await backend.history.record(TYPE, t, NONE)
    await backend.purge_type(TYPE)
    assert await backend.history.record(TYPE, t + 1, NONE) is False
    await push(backend, "c")
    assert await backend.history.record(TYPE, t + 2, NONE) is True
    points = (await backend.history.read(TYPE, "1h", t + 2)).points
    assert sum(p.submitted for p in points) == 1


async def test_two_masters_recording_at_once_count_once(backend: Backend) -> None:
    t = now()
    await backend.history.record(TYPE, t, NONE)
    await push(backend, "a", "b", "c")
    got = await asyncio.gather(*(backend.history.record(TYPE, t + 1, NONE) for _ in range(5)))
    assert sorted(got) == [False, False, False, False, True]
    points = (await backend.history.read(TYPE, "30d", t + 1)).points
    assert sum(p.submitted for p in points) == 3


async def test_minute_buckets_go_after_48_hours_and_hour_buckets_after_30_days(
    backend: Backend,
) -> None:
    t = float(bucket_start(now(), HOUR)) + 30
    await backend.history.record(TYPE, t, NONE)
    await push(backend, "a")
    await backend.history.record(TYPE, t, NONE)
    minute, hour = bucket_start(t, MINUTE), bucket_start(t, HOUR)
    assert await backend.history.buckets(TYPE, MINUTE, [minute]) != {}
    later = minute + MINUTE_KEEP_SECONDS - 1
    await backend.history.record(TYPE, later, NONE)
    assert list(await backend.history.buckets(TYPE, MINUTE, [minute])) == [minute]
    await backend.history.record(TYPE, minute + MINUTE_KEEP_SECONDS, NONE)
    assert await backend.history.buckets(TYPE, MINUTE, [minute]) == {}
    assert list(await backend.history.buckets(TYPE, HOUR, [hour])) == [hour]
    await backend.history.record(TYPE, hour + HOUR_KEEP_SECONDS, NONE)
    assert await backend.history.buckets(TYPE, HOUR, [hour]) == {}


async def test_an_unknown_type_reads_as_zeros_and_a_bad_window_is_refused(
    backend: Backend,
) -> None:
    series = await backend.history.read("never-seen", "1h")
    assert series.automation_type == "never-seen" and series.window == "1h"
    assert len(series.points) == 60 and all(p.p50 is None for p in series.points)
    assert series.points[-1].t <= now() < series.points[-1].t + MINUTE
    with pytest.raises(KeyError):
        await backend.history.read(TYPE, "7d")
