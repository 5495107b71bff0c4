"""A type's history: the master's recorder, and the window the REST API answers.

The recorder: every ``FLEET_HISTORY_INTERVAL_SECONDS`` it records
each known type into ``backend.history`` (docs/operations.md#history).

Every master records, without a lock: a record subtracts the totals stored by the one
before it inside the backend's atomic step, so two masters recording at once never
count anything twice, and one that dies leaves nothing to take over. A pass reads the
catalog and the worker records once (the workers' timed-out counts and run-time
histograms come from their stats frames), then makes one ``record`` call per type.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from fleet.backends.base import Backend
from fleet.core.history import HistorySeries, Reported
from fleet.core.metrics import BUCKETS
from fleet.core.records import now
from fleet.master.services.catalog import require_entry
from fleet.master.services.metrics import DURATION_KEYS
from fleet.master.services.periodic import Periodic

log = logging.getLogger(__name__)


def _count(value: Any) -> int:
    # A stats frame is what a worker wrote: anything unreadable counts 0.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return int(value) if math.isfinite(value) and value > 0 else 0


def worker_report(stats: dict[str, Any] | None) -> Reported:
    """What one worker's stats frame says: its timed-out attempts and run-time
    histogram (empty when it sent none, or one of another layout)."""
    stats = stats or {}
    tasks = stats.get("tasks")
    timed_out = _count(tasks.get("timed_out")) if isinstance(tasks, dict) else 0
    for key in DURATION_KEYS:
        hist = stats.get(key)
        if isinstance(hist, dict):
            buckets = hist.get("buckets")
            if isinstance(buckets, list) and len(buckets) == len(BUCKETS):
                return Reported(timed_out, tuple(_count(b) for b in buckets))
    return Reported(timed_out)


def summed(a: Reported, b: Reported) -> Reported:
    """Two reports added (a histogram missing on one side counts zeros)."""
    if not a.durations or not b.durations:
        durations = a.durations or b.durations
    else:
        durations = tuple(x + y for x, y in zip(a.durations, b.durations, strict=True))
    return Reported(a.timed_out + b.timed_out, durations)


async def gather_reports(backend: Backend) -> dict[str, Reported]:
    """Every type with a catalog entry or a worker, and what its workers report.

    Every registered worker counts, up or not: the last frame of a worker that stopped
    stays as it was and so adds nothing, where leaving it out would make the sum drop
    (counted 0) and jump back by all of its totals if it reported again.
    """
    reports: dict[str, Reported] = dict.fromkeys(await backend.catalog.all(), Reported())
    pairs = await backend.workers.all()
    # One batched read of every worker record (pipelined on Redis), not one a worker.
    for (automation_type, _), record in zip(
        pairs, await backend.workers.get_many(pairs), strict=True
    ):
        so_far = reports.setdefault(automation_type, Reported())
        if record is not None:
            reports[automation_type] = summed(so_far, worker_report(record.stats))
    return reports


class HistoryRecorder(Periodic):
    """Records every type's history periodically.

    Args:
        backend: The backend to record into.
        period: Seconds between passes (``FLEET_HISTORY_INTERVAL_SECONDS``).
    """

    name = "history"
    hint = "history is not recorded meanwhile"
    skipped = "history not recorded: backend error (%s)"
    failed = "history record failed"

    def __init__(self, backend: Backend, period: float) -> None:
        super().__init__(backend, period, log)
        self.passes = 0

    async def tick(self) -> int:
        """Record every type once; how many records added to a bucket."""
        reports = await gather_reports(self.backend)
        wrote = 0
        at = now()
        for automation_type, reported in sorted(reports.items()):
            wrote += await self.backend.history.record(automation_type, at, reported)
        self.passes += 1
        return wrote


async def type_report(backend: Backend, automation_type: str) -> Reported:
    """What the workers of one type report (:func:`gather_reports` for one type)."""
    pairs = [(automation_type, wid) for wid in await backend.workers.ids(automation_type)]
    reported = Reported()
    for record in await backend.workers.get_many(pairs) if pairs else []:
        if record is not None:
            reported = summed(reported, worker_report(record.stats))
    return reported


async def read(backend: Backend, automation_type: str, window: str) -> HistorySeries:
    """The ``window`` of a type's history; 404 for an unknown type (as every per-type read).

    The type is recorded first (one atomic ``record``, as the recorder's): the window
    holds the queue's counts as they are now, not as the last pass left them (the
    workers' run times and timeouts as of their last stats frame).

    Raises:
        NotFound: 404 if no plugin or worker ever published the type.
    """
    await require_entry(backend, automation_type)
    await backend.history.record(
        automation_type, now(), await type_report(backend, automation_type)
    )
    return await backend.history.read(automation_type, window)
