"""The limiters of ``memory://`` (``ctx.limit``): state and the three operations.

Each operation runs without awaiting, so it is atomic under asyncio. A limiter
whose holds have all expired and whose ``tat`` no longer matters is deleted: the
one touched at once, every other one by a scan of the whole table at most every
:data:`SCAN_SECONDS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fleet.core.capabilities.limits import Limiters
from fleet.core.limiter import LimiterView, hold_live, limit_acquire_rule
from fleet.core.records import now

#: Seconds between two scans for unused limiters.
SCAN_SECONDS = 5.0


@dataclass(slots=True)
class Limiter:
    """One limiter: holders (token -> hold end) and the rate's ``tat``, which
    matters until ``tat_until`` (one interval after it)."""

    holders: dict[str, float] = field(default_factory=dict)
    tat: float = 0.0
    tat_until: float = 0.0

    def drop_expired(self, t: float) -> None:
        for token in [k for k, until in self.holders.items() if until <= t]:
            del self.holders[token]

    def unused(self, t: float) -> bool:
        self.drop_expired(t)
        return not self.holders and self.tat_until <= t


class LimitTable:
    """Every limiter of one store, by key."""

    def __init__(self) -> None:
        self.limiters: dict[str, Limiter] = {}
        self._next_scan = 0.0

    def get(self, key: str, t: float) -> Limiter:
        self._scan(t)
        found = self.limiters.get(key)
        if found is None:
            found = self.limiters[key] = Limiter()
        found.drop_expired(t)
        return found

    def tidy(self, key: str, limiter: Limiter, t: float) -> None:
        """Forget ``limiter`` if nothing of it matters any more."""
        if limiter.unused(t):
            self.limiters.pop(key, None)

    def _scan(self, t: float) -> None:
        if t < self._next_scan:
            return
        self._next_scan = t + SCAN_SECONDS
        for key in [k for k, lim in self.limiters.items() if lim.unused(t)]:
            del self.limiters[key]


def acquire(
    table: LimitTable,
    key: str,
    token: str,
    *,
    interval: float | None,
    concurrency: int | None,
    hold: float,
    t: float,
) -> float:
    """:meth:`Limiters.acquire` at time ``t`` (one synchronous step)."""
    lim = table.get(key, t)
    try:
        view = LimiterView(
            holding=token in lim.holders,
            held=len(lim.holders),
            first_end=min(lim.holders.values(), default=None),
            tat=lim.tat if lim.tat_until > t else 0.0,  # forgotten: as if never used
        )
        grant = limit_acquire_rule(view, now=t, interval=interval, concurrency=concurrency)
        if grant.taken:
            lim.holders[token] = t + hold
            if grant.tat is not None and interval is not None:
                lim.tat, lim.tat_until = grant.tat, grant.tat + interval
        return grant.wait
    finally:
        table.tidy(key, lim, t)


def renew(table: LimitTable, key: str, token: str, hold: float, t: float) -> bool:
    """:meth:`Limiters.renew` at time ``t``."""
    lim = table.limiters.get(key)
    if lim is None or not hold_live(lim.holders.get(token), t):
        return False
    lim.holders[token] = t + hold
    return True


def release(table: LimitTable, key: str, token: str, t: float) -> bool:
    """:meth:`Limiters.release` at time ``t``."""
    lim = table.limiters.get(key)
    if lim is None:
        return False
    until = lim.holders.pop(token, None)
    table.tidy(key, lim, t)
    return hold_live(until, t)


class MemoryLimits(Limiters):
    """The limiters of a memory store: one synchronous step each, over its table."""

    def __init__(self, table: LimitTable) -> None:
        self._table = table

    async def acquire(
        self,
        key: str,
        token: str,
        *,
        interval: float | None,
        concurrency: int | None,
        hold_seconds: float,
    ) -> float:
        return acquire(
            self._table,
            key,
            token,
            interval=interval,
            concurrency=concurrency,
            hold=hold_seconds,
            t=now(),
        )

    async def renew(self, key: str, token: str, hold_seconds: float) -> bool:
        return renew(self._table, key, token, hold_seconds, now())

    async def release(self, key: str, token: str) -> bool:
        return release(self._table, key, token, now())
