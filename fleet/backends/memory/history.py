"""The history of ``memory://``: per type, the last totals and the minute and hour
buckets (``fleet.core.history`` decides every step; each runs without awaiting, so it
is atomic under asyncio)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from fleet.core.capabilities.history import History
from fleet.core.history import (
    HOUR,
    MINUTE,
    Reported,
    add,
    bucket_start,
    delta,
    expires_at,
    totals,
)

#: Reads a type's queue counters (name -> total; empty for a type without a queue).
CountersOf = Callable[[str], Mapping[str, int]]


@dataclass(slots=True)
class TypeHistory:
    """One type's history: the baseline, the buckets by resolution and start, and the
    heap of (expiry, resolution, start) that trimming pops."""

    last: list[int] | None = None
    buckets: dict[int, dict[int, list[int]]] = field(default_factory=lambda: {MINUTE: {}, HOUR: {}})
    expiries: list[tuple[int, int, int]] = field(default_factory=list)

    def trim(self, t: float) -> None:
        while self.expiries and self.expiries[0][0] <= t:
            _, resolution, start = heapq.heappop(self.expiries)
            self.buckets[resolution].pop(start, None)

    def add(self, resolution: int, start: int, vector: Sequence[int]) -> None:
        found = self.buckets[resolution]
        if start not in found:
            heapq.heappush(self.expiries, (expires_at(start, resolution), resolution, start))
        found[start] = add(found.get(start), vector)


class HistoryTable:
    """Every type's history of one store."""

    def __init__(self) -> None:
        self.types: dict[str, TypeHistory] = {}


def record(
    table: HistoryTable,
    automation_type: str,
    counters: Mapping[str, int],
    reported: Reported,
    t: float,
) -> bool:
    """:meth:`History.record` at time ``t`` (one synchronous step)."""
    current = totals(counters, reported)
    hist = table.types.get(automation_type)
    if hist is None:
        hist = table.types[automation_type] = TypeHistory()
    diff = delta(hist.last, current)
    wrote = any(diff)
    if wrote:
        hist.add(MINUTE, bucket_start(t, MINUTE), diff)
        hist.add(HOUR, bucket_start(t, HOUR), diff)
    if hist.last != current:
        hist.last = current
    hist.trim(t)
    return wrote


class MemoryHistory(History):
    """The history of a memory store, over its table and its queues' counters."""

    def __init__(self, table: HistoryTable, counters_of: CountersOf) -> None:
        self._table = table
        self._counters_of = counters_of

    async def record(self, automation_type: str, at: float, reported: Reported) -> bool:
        return record(
            self._table, automation_type, self._counters_of(automation_type), reported, at
        )

    async def buckets(
        self, automation_type: str, resolution: int, starts: Sequence[int]
    ) -> dict[int, list[int]]:
        hist = self._table.types.get(automation_type)
        if hist is None:
            return {}
        found = hist.buckets.get(resolution, {})
        return {s: list(found[s]) for s in starts if s in found}
