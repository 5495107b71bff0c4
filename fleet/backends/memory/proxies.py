"""Proxy health of ``memory://`` (``ctx.proxy``): state and the operations.

Each operation runs without awaiting, so it is atomic under asyncio. A proxy's record
is deleted once forgotten (``forget_at`` passed), sticky choices once expired: the one
touched at once, the others by a scan of the whole table at most every
:data:`SCAN_SECONDS`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fleet.core.capabilities.proxies import (
    FORGET_SECONDS,
    MAX_REASON_LEN,
    ProxyHealth,
    ProxyInfo,
    ProxyPolicy,
    ProxyTake,
)
from fleet.core.proxy_health import ProxyView, hold_live, proxy_pick, proxy_report_rule
from fleet.core.records import now

#: Seconds between two scans for forgotten proxies and expired sticky choices.
SCAN_SECONDS = 5.0


@dataclass(slots=True)
class ProxyRecord:
    """One proxy: counters, score, cool-down and places (token -> hold end)."""

    uses: int = 0
    oks: int = 0
    failures: int = 0
    score: int = 0
    cooling_until: float = 0.0
    reason: str | None = None
    bad_at: float | None = None
    places: dict[str, float] = field(default_factory=dict)
    forget_at: float = 0.0

    def drop_expired(self, t: float) -> None:
        for token in [k for k, until in self.places.items() if until <= t]:
            del self.places[token]

    def touch(self, t: float) -> None:
        last = max([t, self.cooling_until, *self.places.values()])
        self.forget_at = last + FORGET_SECONDS

    def info(self, key: str, t: float) -> ProxyInfo:
        self.drop_expired(t)
        return ProxyInfo(
            key=key,
            uses=self.uses,
            oks=self.oks,
            failures=self.failures,
            score=self.score,
            cooling_until=self.cooling_until if self.cooling_until > t else None,
            in_use=len(self.places),
            last_reason=self.reason,
            last_bad_at=self.bad_at,
        )


class ProxyTable:
    """Every proxy record and sticky choice of one store."""

    def __init__(self) -> None:
        self.records: dict[str, ProxyRecord] = {}
        self.sticky: dict[str, tuple[str, float]] = {}  # name -> (key, expires at)
        self._next_scan = 0.0

    def get(self, key: str, t: float) -> ProxyRecord:
        self.scan(t)
        found = self.records.get(key)
        if found is None or found.forget_at <= t:
            found = self.records[key] = ProxyRecord(forget_at=t + FORGET_SECONDS)
        found.drop_expired(t)
        return found

    def peek(self, key: str, t: float) -> ProxyRecord | None:
        found = self.records.get(key)
        return found if found is not None and found.forget_at > t else None

    def sticky_get(self, name: str, t: float) -> str | None:
        hit = self.sticky.get(name)
        return hit[0] if hit is not None and hit[1] > t else None

    def scan(self, t: float) -> None:
        """Drop forgotten records and expired sticky choices (at most every SCAN_SECONDS)."""
        if t < self._next_scan:
            return
        self._next_scan = t + SCAN_SECONDS
        for key in [k for k, r in self.records.items() if r.forget_at <= t]:
            del self.records[key]
        for name in [n for n, (_, until) in self.sticky.items() if until <= t]:
            del self.sticky[name]


def take(
    table: ProxyTable,
    candidates: Sequence[str],
    token: str,
    *,
    held: str | None,
    cap: int | None,
    hold: float,
    sticky: str | None,
    sticky_seconds: float,
    spread: bool,
    t: float,
) -> ProxyTake:
    """:meth:`ProxyHealth.take` at time ``t`` (one synchronous step)."""
    table.scan(t)
    keys = list(dict.fromkeys(candidates))
    # Only the proxy taken gets a record: looking at a candidate stores nothing.
    records = {k: table.peek(k, t) or ProxyRecord() for k in keys}
    for rec in records.values():
        rec.drop_expired(t)
    views = [
        ProxyView(
            k,
            rec.cooling_until,
            len(rec.places),
            token in rec.places,
            min(rec.places.values(), default=None),
        )
        for k, rec in records.items()
    ]
    got = proxy_pick(
        views,
        now=t,
        cap=cap,
        sticky=sticky is not None,
        sticky_choice=None if sticky is None else table.sticky_get(sticky, t),
        spread=spread,
    )
    if got.key is None:
        return got
    rec = table.records[got.key] = records[got.key]
    rec.places[token] = t + hold
    rec.uses += 1
    rec.touch(t)
    if held is not None and held != got.key:
        old = table.peek(held, t)
        if old is not None:
            old.places.pop(token, None)
    if sticky is not None:
        table.sticky[sticky] = (got.key, t + sticky_seconds)
    return got


def renew(table: ProxyTable, key: str, token: str, hold: float, t: float) -> bool:
    """:meth:`ProxyHealth.renew` at time ``t``."""
    rec = table.peek(key, t)
    if rec is None or not hold_live(rec.places.get(token), t):
        return False
    rec.places[token] = t + hold
    rec.touch(t)
    return True


def release(table: ProxyTable, key: str, token: str, t: float) -> bool:
    """:meth:`ProxyHealth.release` at time ``t``."""
    rec = table.peek(key, t)
    return rec is not None and hold_live(rec.places.pop(token, None), t)


def report(
    table: ProxyTable,
    key: str,
    *,
    ok: bool,
    threshold: int,
    cooldown: float,
    reason: str,
    t: float,
) -> float | None:
    """:meth:`ProxyHealth.report` at time ``t``."""
    rec = table.get(key, t)
    if ok:
        rec.oks += 1
    else:
        rec.failures += 1
        rec.reason = reason[:MAX_REASON_LEN] or None
        rec.bad_at = t
    rec.score, rec.cooling_until = proxy_report_rule(
        rec.score, rec.cooling_until, ok=ok, threshold=threshold, cooldown=cooldown, now=t
    )
    rec.touch(t)
    return rec.cooling_until if rec.cooling_until > t else None


class MemoryProxies(ProxyHealth):
    """Proxy health of a memory store: one synchronous step each, over its table.

    Args:
        table: The store's proxy records and sticky choices.
        stored_policy: The proxy policy a type stored with its group limits (None:
            none stored, the caller's values apply); read without creating anything.
    """

    def __init__(
        self,
        table: ProxyTable,
        stored_policy: Callable[[str], tuple[ProxyPolicy | None, int]],
    ) -> None:
        self._table = table
        self._stored = stored_policy

    def _policy_of(self, automation_type: str | None) -> ProxyPolicy | None:
        return None if automation_type is None else self._stored(automation_type)[0]

    async def take(
        self,
        candidates: Sequence[str],
        token: str,
        *,
        held: str | None = None,
        max_concurrency: int | None = None,
        hold_seconds: float = 30.0,
        sticky: str | None = None,
        sticky_seconds: float = 3600.0,
        spread: bool = False,
        automation_type: str | None = None,
    ) -> ProxyTake:
        stored = self._policy_of(automation_type)
        return take(
            self._table,
            candidates,
            token,
            held=held,
            cap=max_concurrency if stored is None else stored.max_concurrency,
            hold=hold_seconds,
            sticky=sticky,
            sticky_seconds=sticky_seconds,
            spread=spread,
            t=now(),
        )

    async def renew(self, key: str, token: str, hold_seconds: float) -> bool:
        return renew(self._table, key, token, hold_seconds, now())

    async def release(self, key: str, token: str) -> bool:
        return release(self._table, key, token, now())

    async def report(
        self,
        key: str,
        *,
        ok: bool,
        threshold: int = 1,
        cooldown_seconds: float = 300.0,
        reason: str = "",
        automation_type: str | None = None,
    ) -> float | None:
        stored = self._policy_of(automation_type)
        if stored is not None:
            threshold, cooldown_seconds = stored.bad_threshold, stored.cooldown_seconds
        return report(
            self._table,
            key,
            ok=ok,
            threshold=threshold,
            cooldown=cooldown_seconds,
            reason=reason,
            t=now(),
        )

    async def policy(self, automation_type: str) -> tuple[ProxyPolicy | None, int]:
        await asyncio.sleep(0)
        return self._stored(automation_type)

    async def listing(self, *, limit: int = 1000) -> list[ProxyInfo]:
        t = now()
        table = self._table
        live = sorted(k for k, r in table.records.items() if r.forget_at > t)
        return [table.records[k].info(k, t) for k in live[: max(0, limit)]]

    async def sticky(self, name: str) -> str | None:
        return self._table.sticky_get(name, now())
