"""History: per-type counts and run times by minute and hour, kept in the backend so
that every master answers the same, across restarts (``fleet.core.history`` holds the
model and the rules; docs/operations.md what is kept and what it costs)."""

from __future__ import annotations

import abc
from collections.abc import Sequence

from fleet.core.history import WINDOWS, HistorySeries, Reported, points, starts_in
from fleet.core.records import now


class History(abc.ABC):
    """Record a type's totals into its history; read a window of it.

    Stored per type: the totals of the last record (the baseline of the next), minute
    buckets (kept 48 h) and hour buckets (kept 30 days), each a vector of
    :data:`fleet.core.history.VECTOR_LEN` integers.
    """

    @abc.abstractmethod
    async def record(self, automation_type: str, at: float, reported: Reported) -> bool:
        """Add what happened to ``automation_type`` since the last record, in one atomic step.

        At time ``at``: read the type's queue counters (``QueueCounters``; a type without
        any counts zeros), build the totals with :func:`fleet.core.history.totals`, take
        :func:`~fleet.core.history.delta` against the stored totals of the last record,
        and when anything happened add it to the minute bucket and the hour bucket holding
        ``at``; store the totals as the new baseline if they changed; drop the buckets no
        longer :func:`~fleet.core.history.kept` at ``at``. A type where nothing happened
        is not written to.

        Args:
            automation_type: The type.
            at: The time of the record (Unix seconds).
            reported: What its live workers report (timed out, run-time histogram).

        Returns:
            True if a bucket was added to.
        """

    @abc.abstractmethod
    async def buckets(
        self, automation_type: str, resolution: int, starts: Sequence[int]
    ) -> dict[int, list[int]]:
        """The stored buckets of ``resolution`` (60 or 3600) among ``starts``, by start;
        buckets never written (or unreadable) are left out."""

    async def read(
        self, automation_type: str, window: str, at: float | None = None
    ) -> HistorySeries:
        """The ``window`` (``1h``, ``24h`` or ``30d``) of a type's history at ``at``
        (default: now), every point present (zeros where nothing happened).

        Raises:
            KeyError: Not a window of :data:`fleet.core.history.WINDOWS`.
        """
        if window not in WINDOWS:
            raise KeyError(window)
        t = now() if at is None else at
        resolution, starts = starts_in(window, t)
        found = await self.buckets(automation_type, resolution, starts)
        return points(automation_type, window, t, found)
