"""The one clock: what time it is for every backend, worker, master job and the scheduler.

Every rule that compares times (leases, TTLs, cool-downs, delays, schedules, history
buckets, run expiry) reads wall-clock Unix time through :func:`now`, so a test can
move time instead of sleeping: :func:`frozen` stops the clock at a given time, and
the :class:`ManualClock` it yields moves only when told (``advance``). Storage that
keeps its own time (a Redis key's ``EXPIRE``) is not moved by it: a test of such a TTL
still waits for it.

Costs one indirection per read; nothing else changes for production code.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol


class Clock(Protocol):
    """A source of wall-clock Unix time."""

    def time(self) -> float: ...


class SystemClock:
    """The real clock (:func:`time.time`)."""

    def time(self) -> float:
        return time.time()


class ManualClock:
    """A clock that moves only when told: for tests of time rules.

    Args:
        at: The time it starts at (Unix seconds).
    """

    def __init__(self, at: float) -> None:
        self.at = float(at)

    def time(self) -> float:
        return self.at

    def advance(self, seconds: float) -> float:
        """Move the clock forward; the new time."""
        if seconds < 0:
            raise ValueError(f"a clock does not go back ({seconds} s)")
        self.at += seconds
        return self.at

    def set(self, at: float) -> None:
        """Put the clock at ``at`` (not before where it is)."""
        if at < self.at:
            raise ValueError(f"a clock does not go back ({at} < {self.at})")
        self.at = float(at)


SYSTEM = SystemClock()
_clock: Clock = SYSTEM


def now() -> float:
    """Wall-clock Unix time, from the clock in use (the system's unless a test set one)."""
    return _clock.time()


def current() -> Clock:
    """The clock in use."""
    return _clock


def use(clock: Clock) -> Clock:
    """Make ``clock`` the one every reader uses; the clock it replaces."""
    global _clock
    before, _clock = _clock, clock
    return before


@contextmanager
def frozen(at: float | None = None) -> Iterator[ManualClock]:
    """A :class:`ManualClock` in use for the block (starting at ``at``, else now)."""
    manual = ManualClock(time.time() if at is None else at)
    before = use(manual)
    try:
        yield manual
    finally:
        use(before)
