"""The rule of ``ctx.limit`` (:class:`~fleet.core.capabilities.Limiters`) as pure
functions over what a backend read of one limiter: the memory backend and the
SQLite transaction both call them; ``lua/limits.lua`` is the only other copy,
checked against them by ``tests/conformance/test_differential_rules.py``."""

from __future__ import annotations

from dataclasses import dataclass

from fleet.core.capabilities.limits import CONCURRENCY_RETRY_SECONDS
from fleet.core.flow import next_tat


@dataclass(frozen=True, slots=True)
class LimiterView:
    """One limiter as ``acquire`` sees it at ``now``, expired holds left out.

    Attributes:
        holding: The caller's token holds a live place.
        held: Live places.
        first_end: When the earliest live hold ends (None: none held).
        tat: The rate's next allowed start; 0.0 when it no longer matters
            (forgotten one interval after it).
    """

    holding: bool
    held: int
    first_end: float | None
    tat: float


@dataclass(frozen=True, slots=True)
class LimitGrant:
    """What ``acquire`` decided.

    Attributes:
        wait: 0.0: the place is taken (or, when already held, extended); else the
            seconds to wait before trying again (nothing changes).
        tat: The rate's new ``tat`` to store (None: unchanged).
    """

    wait: float
    tat: float | None = None

    @property
    def taken(self) -> bool:
        return self.wait <= 0


def limit_acquire_rule(
    view: LimiterView,
    *,
    now: float,
    interval: float | None,
    concurrency: int | None,
) -> LimitGrant:
    """Whether the token may take a place now (docs/primitives.md "Limits").

    A token that already holds one is extended and charged nothing (a retried
    acquire). A full limiter answers the time to its first hold's end, at most
    :data:`CONCURRENCY_RETRY_SECONDS` (a holder may release sooner); a rate not yet
    due answers its ``tat``; the longer of the two wins. A taken place moves the
    rate's schedule on by one interval (:func:`fleet.core.flow.next_tat`).
    """
    if view.holding:
        return LimitGrant(0.0)
    wait = 0.0
    if concurrency is not None and view.held >= concurrency and view.first_end is not None:
        wait = min(view.first_end - now, CONCURRENCY_RETRY_SECONDS)
    if interval is not None and view.tat > now:
        wait = max(wait, view.tat - now)
    if wait > 0:
        return LimitGrant(wait)
    return LimitGrant(0.0, None if interval is None else next_tat(view.tat, now, interval))


def hold_live(hold_end: float | None, now: float) -> bool:
    """A hold (a limiter's place, a proxy's place) is live until its end: it can be
    renewed, and a release of it answers True (the hold is dropped either way)."""
    return hold_end is not None and hold_end > now
