"""The depths of a type's queue in the memory backend (what ``depths`` reports).
Mixed into :class:`~fleet.backends.memory.queue.QueueState`."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from fleet.core.records import TIERS, QueueCounters, QueueDepths, TaskBody, Tier

if TYPE_CHECKING:
    from fleet.backends.memory.group_book import GroupBook


class QueueView:
    """The depths half of a type's queue state."""

    tasks: dict[str, Any]
    tiers: dict[Tier, deque[tuple[str, int]]]
    tier_len: dict[Tier, int]
    n_processing: int
    n_scheduled: int
    dead: dict[str, TaskBody]
    counters: dict[str, int]
    groups: GroupBook

    def _oldest_enqueued(self) -> float | None:
        # Heads of the tiers: exact for FIFO traffic; a retried task re-enters at
        # the tail with its old submit time, as on every backend.
        oldest: float | None = None
        lines = [self.tiers[tier] for tier in TIERS]
        for group in self.groups.groups.values():  # tasks waiting in groups are pending too
            if group.pending:
                lines += group.tiers.values()
        for entries in lines:
            while entries:
                tid, seq = entries[0]
                task = self.tasks.get(tid)
                if task is not None and task.seq == seq and task.state == "queued":
                    at = task.body.enqueued_at
                    oldest = at if oldest is None else min(oldest, at)
                    break
                entries.popleft()
        return oldest

    def depths(self, now: float) -> QueueDepths:
        oldest = self._oldest_enqueued()
        return QueueDepths(
            high=self.tier_len["high"],
            normal=self.tier_len["normal"],
            low=self.tier_len["low"],
            processing=self.n_processing,
            scheduled=self.n_scheduled,
            dead=len(self.dead),
            oldest_pending_age=None if oldest is None else max(now - oldest, 0.0),
            counters=QueueCounters(**self.counters),
        )
