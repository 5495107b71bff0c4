"""Error groups: a type's failures grouped by their key, with snapshots
(:mod:`fleet.core.error_groups` holds the rules every backend follows)."""

from __future__ import annotations

import abc
from collections.abc import Sequence

from fleet.core.error_groups import ErrorGroup, GroupDelta, GroupPage, Snapshot


class ErrorGroups(abc.ABC):
    """Per type, failure groups and their snapshots (``backend.errors``)."""

    @abc.abstractmethod
    async def record(self, automation_type: str, deltas: Sequence[GroupDelta]) -> None:
        """Land every delta in one atomic step, each by
        :func:`fleet.core.error_groups.merged`; a group is gone
        :data:`~fleet.core.error_groups.TTL_SECONDS` after its last seen."""

    @abc.abstractmethod
    async def put(self, automation_type: str, group: str, snapshot: Snapshot) -> bool:
        """Keep ``snapshot`` under ``group`` (its id replaces one of the same id), making
        room by :func:`fleet.core.error_groups.evicted`; False if it was refused (heavier
        than the type's whole budget). Gone ``TTL_SECONDS`` after it was taken.

        Raises:
            ContractValueError: ``group`` or the snapshot's id is not an id.
        """

    @abc.abstractmethod
    async def page(
        self, automation_type: str, *, cursor: str | None = None, limit: int = 50
    ) -> GroupPage:
        """The type's groups, newest ``last_seen`` first (then by id, descending), after
        ``cursor``, at most ``limit`` (1..200); their snapshots left out.

        Raises:
            ContractValueError: A bad cursor or limit.
        """

    @abc.abstractmethod
    async def get(self, automation_type: str, group: str) -> ErrorGroup | None:
        """One group with its snapshots' descriptions, newest first (None: unknown or
        gone)."""

    @abc.abstractmethod
    async def snapshot(self, automation_type: str, group: str, snapshot_id: str) -> Snapshot | None:
        """One snapshot with its bodies (None: unknown or gone)."""

    @abc.abstractmethod
    async def forget(self, automation_type: str) -> None:
        """Drop every group and snapshot of the type (a purged type's)."""
