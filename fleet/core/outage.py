"""Outages in the log: one line when a component loses the backend, one every
``REPORT_EVERY`` seconds while it stays lost, one when it is back.

Every loop that talks to the backend (a worker's feeder, heartbeat and event
loops, a master's sweeper...) retries on its own schedule; logging each failed
retry would bury the one fact an operator needs under hundreds of lines and
tracebacks. :class:`OutageLog` keeps, per component name, whether that
component is down, since when and how often it failed, and decides which
failures deserve a line. It is plain logic with an injectable clock: no event
loop, thread-safe (the SQLite poller reports from its own thread).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from fleet.core.errors import BackendUnavailable

#: Seconds between two "still down" lines of one component.
REPORT_EVERY = 30.0
#: How far :func:`is_outage` follows ``raise ... from`` chains.
_CHAIN_LIMIT = 8


def is_outage(exc: BaseException) -> bool:
    """True if ``exc`` is :class:`BackendUnavailable`, or was raised ``from`` one
    (plugin code that wraps the backend's error in its own)."""
    current: BaseException | None = exc
    for _ in range(_CHAIN_LIMIT):
        if current is None:
            return False
        if isinstance(current, BackendUnavailable):
            return True
        current = current.__cause__
    return False


def _attempts(n: int) -> str:
    return f"{n} failed attempt" if n == 1 else f"{n} failed attempts"


@dataclass(slots=True)
class _Down:
    """One component's ongoing outage."""

    since: float
    reported: float
    failures: int


class OutageLog:
    """Turns the failures and successes of named components into outage lines.

    Call :meth:`failed` on every failed backend call of a component and
    :meth:`recovered` after every successful one (cheap while nothing is down).
    The three lines are all warnings, so a log filtered at WARNING still shows
    that the backend came back.

    Args:
        logger: Where the lines go unless a call names its own logger.
        every: Seconds between two "still down" lines of one component.
        clock: Monotonic time source (injectable for tests).
    """

    def __init__(
        self,
        logger: logging.Logger,
        *,
        every: float = REPORT_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.every = every
        self._clock = clock
        self._down: dict[str, _Down] = {}
        self._lock = threading.Lock()

    def is_down(self, component: str) -> bool:
        """True between a component's first failure and its recovery."""
        return component in self._down

    def failed(
        self,
        component: str,
        error: BaseException | str,
        *,
        hint: str = "retrying",
        logger: logging.Logger | None = None,
    ) -> str | None:
        """Record one failure of ``component``.

        Args:
            component: Who failed, as it should read in the log ("heartbeat").
            error: What failed (its text names the backend, password redacted).
            hint: What happens now, or what to check (first line only).
            logger: Log there instead of :attr:`logger`.

        Returns:
            The line logged, or None if this failure was not worth one.
        """
        now = self._clock()
        with self._lock:
            down = self._down.get(component)
            if down is None:
                self._down[component] = _Down(since=now, reported=now, failures=1)
                line = f"{component}: backend down ({error}); {hint}"
            else:
                down.failures += 1
                if now - down.reported < self.every:
                    return None
                down.reported = now
                line = (
                    f"{component}: backend still down after {now - down.since:.0f}s "
                    f"({_attempts(down.failures)}; last: {error})"
                )
        (logger or self.logger).warning("%s", line)
        return line

    def recovered(self, component: str, *, logger: logging.Logger | None = None) -> str | None:
        """Record a success of ``component``.

        Returns:
            The "back" line if the component was down, else None (nothing logged).
        """
        if component not in self._down:  # the common case: no lock, no clock
            return None
        with self._lock:
            down = self._down.pop(component, None)
        if down is None:
            return None
        line = (
            f"{component}: backend back after {self._clock() - down.since:.1f}s "
            f"({_attempts(down.failures)})"
        )
        (logger or self.logger).warning("%s", line)
        return line
