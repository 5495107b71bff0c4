"""What a type needs of the fleet: its arrival and completion rates, what one worker
finishes, and how many workers would keep up (``desired_workers``), for an
autoscaler (KEDA, an HPA) to read from ``/metrics`` or ``GET /automations``.

:func:`desired_workers` is the rule, a pure function; :class:`RateBook` turns the
queue's cumulative counters, read at scrape time, into rates. See
docs/autoscaling.md.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import TypedDict

from fleet.core.records import QueueDepths

#: Seconds within which the fleet should clear a type's backlog on top of keeping
#: up with its arrivals.
DRAIN_SECONDS = 60.0
#: Rates are measured over at most this many seconds of the master's reads...
RATE_WINDOW_SECONDS = 60.0
#: ...and at least this many (a single read gives no rate).
MIN_RATE_SPAN_SECONDS = 1.0


class Demand(TypedDict):
    """One type's needs (``demand`` of ``GET /automations``; ``fleet_*`` gauges).

    Attributes:
        pending: Tasks waiting in the queue.
        processing: Tasks running (reserved by a worker).
        oldest_pending_age: Seconds the oldest pending task has waited (None: none waits).
        arrival_rate: Tasks submitted per second (None until the master read twice).
        completion_rate: Tasks completed per second (None likewise).
        slot_rate: Tasks one busy slot completes per second (None: no slot was busy).
        workers: Live workers of the type.
        slots: Their slots.
        desired_workers: Workers that would keep up with the arrivals and clear the
            backlog within :data:`DRAIN_SECONDS` (0: nothing to do).
    """

    pending: int
    processing: int
    oldest_pending_age: float | None
    arrival_rate: float | None
    completion_rate: float | None
    slot_rate: float | None
    workers: int
    slots: int
    desired_workers: int


def desired_workers(
    *,
    pending: int,
    processing: int,
    arrival_rate: float,
    worker_rate: float | None,
    workers: int,
    drain_seconds: float = DRAIN_SECONDS,
) -> int:
    """Workers a type needs.

    Args:
        pending: Tasks waiting.
        processing: Tasks running.
        arrival_rate: Tasks submitted per second.
        worker_rate: Tasks one worker completes per second at full use (None or 0:
            not measured yet).
        workers: Live workers now.
        drain_seconds: Time to clear the backlog in.

    Returns:
        0 with nothing waiting, running or arriving (scale to zero); else enough
        workers for ``arrival_rate + pending / drain_seconds``, at least one; the
        workers already running (at least one) while no worker rate is known.
    """
    if pending <= 0 and processing <= 0 and arrival_rate <= 0:
        return 0
    if not worker_rate or worker_rate <= 0:
        return max(workers, 1)
    need = max(arrival_rate, 0.0) + max(pending, 0) / drain_seconds
    # 1e-9: a need that is an exact multiple of the rate is not one worker more
    return max(1, math.ceil(need / worker_rate - 1e-9))


def worker_rate(slot_rate: float | None, slots: int, workers: int) -> float | None:
    """What one worker completes per second with all its slots busy: a busy slot's
    rate times the slots per worker (None when either is unknown)."""
    if slot_rate is None or workers <= 0 or slots <= 0:
        return None
    return slot_rate * slots / workers


@dataclass(frozen=True, slots=True)
class _Read:
    at: float
    submitted: int
    completed: int


class RateBook:
    """Cumulative submitted/completed counters read at scrape time, per type, and
    the rates between the oldest and newest read of the last
    :data:`RATE_WINDOW_SECONDS`. One per master process (each master measures on
    its own; the counters are the fleet's)."""

    def __init__(self) -> None:
        self._reads: dict[str, deque[_Read]] = {}

    def rates(
        self, automation_type: str, now: float, submitted: int, completed: int
    ) -> tuple[float | None, float | None]:
        """Note a read; ``(arrival_rate, completion_rate)``, None until two reads
        at least :data:`MIN_RATE_SPAN_SECONDS` apart."""
        reads = self._reads.setdefault(automation_type, deque())
        if reads and (submitted < reads[-1].submitted or completed < reads[-1].completed):
            reads.clear()  # the type's state was deleted: its counters started over
        if len(reads) > 1 and now - reads[-1].at < MIN_RATE_SPAN_SECONDS / 2:
            reads.pop()  # reads in quick succession (many clients) keep the deque short
        reads.append(_Read(now, submitted, completed))
        while len(reads) > 2 and now - reads[1].at >= RATE_WINDOW_SECONDS:
            reads.popleft()
        first = reads[0]
        span = now - first.at
        if span < MIN_RATE_SPAN_SECONDS:
            return None, None
        return (submitted - first.submitted) / span, (completed - first.completed) / span


def measure(
    depths: QueueDepths,
    rates: tuple[float | None, float | None],
    *,
    workers: int,
    slots: int,
    slots_busy: int,
) -> Demand:
    """One type's :class:`Demand` from its queue, its rates and its live workers'
    slots (``slots_busy``: busy at their last report)."""
    arrival, completion = rates
    slot_rate = completion / slots_busy if completion is not None and slots_busy > 0 else None
    return {
        "pending": depths.pending,
        "processing": depths.processing,
        "oldest_pending_age": depths.oldest_pending_age,
        "arrival_rate": None if arrival is None else round(arrival, 4),
        "completion_rate": None if completion is None else round(completion, 4),
        "slot_rate": None if slot_rate is None else round(slot_rate, 4),
        "workers": workers,
        "slots": slots,
        "desired_workers": desired_workers(
            pending=depths.pending,
            processing=depths.processing,
            arrival_rate=arrival or 0.0,
            worker_rate=worker_rate(slot_rate, slots, workers),
            workers=workers,
        ),
    }
