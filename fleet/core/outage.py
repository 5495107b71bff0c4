"""Outages in the log: one line when a process loses its backend, one every
``REPORT_EVERY`` seconds while it stays lost, one when it is back — however many of
its loops notice.

Every loop that talks to the backend (a worker's feeder, heartbeat and event
loops, each slot, a master's sweeper...) retries on its own schedule; logging each
failed retry, or even each loop's outage, would bury the one fact an operator needs
under lines that grow with every new loop. So the loops of a process report into one
:class:`OutageBoard` (:data:`PROCESS_OUTAGES` unless given another), which keeps one
outage per backend, named by the error's text (``redis at <url>``, ``sqlite
<path>``): the first failure of any loop logs "backend down", at most one "still
down" follows per period, and the first success of any loop logs "back".
:class:`OutageLog` is each loop's view of it, by component name, as before. It is
plain logic with an injectable clock: no event loop, thread-safe (the SQLite poller
reports from its own thread).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from fleet.core.errors import BackendUnavailable

#: Seconds between two "still down" lines of one process.
REPORT_EVERY = 30.0
#: After a "back" line, failures for this long are taken for calls that began before
#: the recovery (a connect attempt timing out late): they say nothing unless they go on
#: past it with no success in between.
SETTLE_SECONDS = 5.0
#: An outage no loop reported a failure for this long is over without a word (every
#: loop retries at least every 30 s while it is down; one that stopped retrying, or a
#: backend closed in a test, must not mute the next outage).
STALE_SECONDS = 3 * REPORT_EVERY
#: How far :func:`is_outage` follows ``raise ... from`` chains.
_CHAIN_LIMIT = 8
#: The backend an error names: Redis's errors say ``redis at <url>``, SQLite's
#: ``sqlite <path>:`` (URLs are redacted before they reach an error).
_BACKEND = re.compile(r"redis at (?P<redis>\S+)|sqlite (?P<sqlite>.+?):")


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


def backend_of(error: BaseException | str) -> str | None:
    """The backend an error names (``redis://...``, ``sqlite:<path>``), or None; an
    exception raised ``from`` a backend's error names that one's."""
    current: BaseException | str | None = error
    for _ in range(_CHAIN_LIMIT):
        if current is None:
            return None
        m = _BACKEND.search(str(current))
        if m is not None:
            return m["redis"] if m["redis"] is not None else f"sqlite:{m['sqlite']}"
        current = current.__cause__ if isinstance(current, BaseException) else None
    return None


def _attempts(n: int) -> str:
    return f"{n} failed attempt" if n == 1 else f"{n} failed attempts"


Loop = tuple[int, str]  # (the OutageLog's id, the component)


@dataclass(slots=True)
class _Outage:
    """One backend's ongoing outage, as the process sees it."""

    since: float
    reported: float
    last: float
    failures: int
    announced: bool
    loops: set[Loop] = field(default_factory=set)  # failing now (no success since)
    seen: set[Loop] = field(default_factory=set)  # failed at least once in this outage


@dataclass(slots=True)
class _BackendState:
    outage: _Outage | None = None
    back_at: float = float("-inf")


class OutageBoard:
    """The outages of one process, one per backend: what its :class:`OutageLog` views
    report into. :data:`PROCESS_OUTAGES` is the process's; tests make their own.

    Args:
        settle: :data:`SETTLE_SECONDS`.
        stale: :data:`STALE_SECONDS`.
    """

    def __init__(self, *, settle: float = SETTLE_SECONDS, stale: float = STALE_SECONDS) -> None:
        self.settle = settle
        self.stale = stale
        self._states: dict[str, _BackendState] = {}
        self._last_key = ""
        self._lock = threading.Lock()

    def _state(self, key: str) -> _BackendState:
        found = self._states.get(key)
        if found is None:
            found = self._states[key] = _BackendState()
        return found

    def guess(self) -> str:
        """The backend an error that names none is about: the one down now if there is
        exactly one, else the last one named (a process has one backend, but tests may
        run several)."""
        down = [k for k, st in self._states.items() if st.outage is not None]
        return down[0] if len(down) == 1 else self._last_key

    def is_down(self, key: str) -> bool:
        """True while ``key``'s outage lasts (announced or not)."""
        st = self._states.get(key)
        return st is not None and st.outage is not None

    def failed(
        self, key: str, loop: Loop, now: float, every: float, first: str, still: str
    ) -> str | None:
        """Record one failure; the line to log (``first``, or a "still down" line built
        from ``still``, the last error), or None."""
        with self._lock:
            unnamed = self._states.get("")
            if key and unnamed is not None and unnamed.outage is not None:
                # The outage began with errors that named no backend (a timeout): it
                # was this one's. (A second backend down at once keeps its own.)
                named = self._state(key)
                if named.outage is None:
                    named.outage, unnamed.outage = unnamed.outage, None
            if key:
                self._last_key = key
            st = self._state(key)
            o = st.outage
            if o is not None and now - o.last >= self.stale:
                st.outage, o = None, None
            if o is None:
                o = st.outage = _Outage(
                    since=now, reported=now, last=now, failures=0, announced=False
                )
            o.failures += 1
            o.last = now
            o.loops.add(loop)
            o.seen.add(loop)
            if not o.announced:
                if now - st.back_at < self.settle:
                    return None  # a call from before the recovery, most likely
                o.announced = True
                o.reported = now
                return first
            if now - o.reported < every:
                return None
            o.reported = now
            loops = f" in {len(o.seen)} loops" if len(o.seen) > 1 else ""
            return (
                f"backend still down after {now - o.since:.0f}s "
                f"({_attempts(o.failures)}{loops}; last: {still})"
            )

    def recovered(self, key: str, loop: Loop, now: float, *, certain: bool) -> str | None:
        """Record a success; the "back" line to log, or None."""
        with self._lock:
            st = self._states.get(key)
            o = None if st is None else st.outage
            if st is None or o is None:
                return None
            o.loops.discard(loop)
            if not certain and o.loops:
                return None  # this loop is fine, but others still fail
            st.outage = None
            if not o.announced:
                return None
            st.back_at = now
            loops = f" in {len(o.seen)} loops" if len(o.seen) > 1 else ""
            return f"backend back after {now - o.since:.1f}s ({_attempts(o.failures)}{loops})"


#: The outages of this process: every OutageLog reports here unless given a board.
PROCESS_OUTAGES = OutageBoard()


class OutageLog:
    """One loop's (or a group of loops') view of the process's outages, by component.

    Call :meth:`failed` on every failed backend call of a component and
    :meth:`recovered` after every successful one (cheap while nothing is down). The
    lines are per process and backend, not per component: the first failure of any
    component logs "<component>: backend down", then at most one "still down" line per
    ``every`` seconds, and the first success of any component logs "<component>:
    backend back". The three lines are all warnings, so a log filtered at WARNING still
    shows that the backend came back.

    Args:
        logger: Where the lines go unless a call names its own logger.
        every: Seconds between two "still down" lines.
        clock: Monotonic time source (injectable for tests).
        board: The outages reported into (default: :data:`PROCESS_OUTAGES`).
    """

    def __init__(
        self,
        logger: logging.Logger,
        *,
        every: float = REPORT_EVERY,
        clock: Callable[[], float] = time.monotonic,
        board: OutageBoard | None = None,
    ) -> None:
        self.logger = logger
        self.every = every
        self._clock = clock
        self.board = board if board is not None else PROCESS_OUTAGES
        self._down: dict[str, str] = {}  # component -> the backend it failed on

    def is_down(self, component: str) -> bool:
        """True between a component's first failure and its own recovery (another
        component's success ends the outage's lines, not this)."""
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
        key = backend_of(error) or self._down.get(component) or self.board.guess()
        self._down[component] = key
        line = self.board.failed(
            key,
            (id(self), component),
            self._clock(),
            self.every,
            f"backend down ({error}); {hint}",
            str(error),
        )
        if line is None:
            return None
        line = f"{component}: {line}"
        (logger or self.logger).warning("%s", line)
        return line

    def recovered(
        self, component: str, *, certain: bool = True, logger: logging.Logger | None = None
    ) -> str | None:
        """Record a success of ``component``.

        Args:
            component: Who succeeded.
            certain: False when the success does not prove the backend answers (a
                ``run_slot`` that ran for a while, a cleanup that may not touch it):
                then the outage is over only if no other component still fails.
            logger: Log there instead of :attr:`logger`.

        Returns:
            The "back" line if this success ended the process's outage, else None.
        """
        key = self._down.pop(component, None)
        if key is None:
            # The common case (nothing down: no lock, no clock). A component that did not
            # fail says nothing either: which backend answered it is unknown (tests run
            # masters on several in one process), and every loop of a process that lost
            # its backend fails, so one of those says "back".
            return None
        if not self.board.is_down(key):
            key = self.board.guess()  # its outage moved to the backend named since
        line = self.board.recovered(key, (id(self), component), self._clock(), certain=certain)
        if line is None:
            return None
        line = f"{component}: {line}"
        (logger or self.logger).warning("%s", line)
        return line
