"""The limiters of ``memory://`` (``ctx.limit``): state and the three operations.

Each operation runs without awaiting, so it is atomic under asyncio. A limiter
whose holds have all expired and whose ``tat`` no longer matters is deleted: the
one touched at once, every other one by a scan of the whole table at most every
:data:`SCAN_SECONDS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fleet.core.capabilities.limits import CONCURRENCY_RETRY_SECONDS
from fleet.core.flow import next_tat
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


class MemoryLimitsMixin:
    """``limit_acquire``, ``limit_renew`` and ``limit_release`` over the store's table."""

    #: The store's table (set by the backend: typed here without the store, which
    #: imports this module).
    _limit_table: LimitTable

    async def limit_acquire(
        self,
        key: str,
        token: str,
        *,
        interval: float | None,
        concurrency: int | None,
        hold_seconds: float,
    ) -> float:
        t = now()
        table = self._limit_table
        lim = table.get(key, t)
        try:
            if token in lim.holders:
                lim.holders[token] = t + hold_seconds
                return 0.0
            wait = 0.0
            if concurrency is not None and len(lim.holders) >= concurrency:
                wait = min(min(lim.holders.values()) - t, CONCURRENCY_RETRY_SECONDS)
            tat = lim.tat if lim.tat_until > t else 0.0  # forgotten: as if never used
            if interval is not None and tat > t:
                wait = max(wait, tat - t)
            if wait > 0:
                return wait
            lim.holders[token] = t + hold_seconds
            if interval is not None:
                lim.tat = next_tat(tat, t, interval)
                lim.tat_until = lim.tat + interval
            return 0.0
        finally:
            table.tidy(key, lim, t)

    async def limit_renew(self, key: str, token: str, hold_seconds: float) -> bool:
        t = now()
        lim = self._limit_table.limiters.get(key)
        if lim is None or lim.holders.get(token, t) <= t:
            return False
        lim.holders[token] = t + hold_seconds
        return True

    async def limit_release(self, key: str, token: str) -> bool:
        t = now()
        table = self._limit_table
        lim = table.limiters.get(key)
        if lim is None:
            return False
        until = lim.holders.pop(token, None)
        table.tidy(key, lim, t)
        return until is not None and until > t
