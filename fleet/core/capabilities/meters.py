"""Meters: sums of what the fleet spent, per scope (:mod:`fleet.core.meters` holds the
scopes, the meter names and the rules every backend follows)."""

from __future__ import annotations

import abc
from collections.abc import Sequence

from fleet.core.meters import DayHold, MeterBatch


class Meters(abc.ABC):
    """Sums by scope and meter (``backend.meters``)."""

    @abc.abstractmethod
    async def add(self, batch: MeterBatch) -> None:
        """Add every sum of ``batch`` in one atomic step (all of it or none), following
        :func:`fleet.core.meters.added` per scope; an hour scope is kept
        :data:`~fleet.core.meters.HOUR_KEEP_SECONDS` after its hour."""

    @abc.abstractmethod
    async def get(self, scopes: Sequence[str]) -> dict[str, dict[str, float]]:
        """The meters of each scope, by scope (a scope never added to is left out)."""

    @abc.abstractmethod
    async def scopes(self, prefix: str, *, after: str | None = None, limit: int = 50) -> list[str]:
        """Scopes starting with ``prefix`` (``domain:<type>:``, ``run:``…), by name after
        ``after``, at most ``limit`` (1..1000); in O(page). Hour scopes are not listed:
        a reader names the hours it wants (:func:`fleet.core.meters.hour_scope`)."""

    @abc.abstractmethod
    async def held(self, automation_type: str) -> DayHold | None:
        """Whether the type is held by its ``daily_budget`` (the step that added its
        meters past it holds it until the next UTC day): until when and why."""

    @abc.abstractmethod
    async def unhold(self, automation_type: str) -> bool:
        """End the type's hold (its budget was raised or removed); True if it had one.
        Reservers waiting on the type look again."""

    @abc.abstractmethod
    async def forget(self, prefix: str) -> int:
        """Drop every scope starting with ``prefix`` (a purged type's); how many."""
