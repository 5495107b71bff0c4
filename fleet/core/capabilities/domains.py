"""The domains of each type and the proxy tier each goes through, learned fleet-wide
(:mod:`fleet.core.tiers` holds the record and the rule every backend follows)."""

from __future__ import annotations

import abc
from collections.abc import Sequence

from fleet.core.blocks.verdicts import VerdictKind
from fleet.core.tiers import DomainPage, DomainTier, TierRule, TierStep


class Domains(abc.ABC):
    """Per ``(type, domain)``: the current proxy tier and the verdicts met
    (``backend.domains``)."""

    @abc.abstractmethod
    async def get(self, automation_type: str, domain: str) -> DomainTier | None:
        """What the fleet knows of a domain; None if no verdict was recorded for it."""

    @abc.abstractmethod
    async def record(
        self,
        automation_type: str,
        domain: str,
        *,
        tier: int,
        kind: VerdictKind,
        vendor: str | None = None,
        rule: TierRule,
        count: int = 1,
    ) -> TierStep:
        """Record ``count`` verdicts of ``kind`` met at ``tier`` in one atomic step of
        :func:`fleet.core.tiers.step`, at the backend's now. The rule's numbers are the
        type's stored type-wide config where it sets them (``proxy_tiers`` for the
        count of tiers, ``tier_escalate_after``, ``tier_window_seconds``,
        ``tier_probe_after_seconds``, ``tier_probe_successes``), else ``rule``'s."""

    async def record_counts(
        self,
        automation_type: str,
        counts: Sequence[tuple[str, int, VerdictKind, int]],
        *,
        rule: TierRule,
    ) -> list[TierStep]:
        """:meth:`record` for each ``(domain, tier, kind, count)`` (what a worker sums
        and sends once a second), in order; a backend may do them in one step."""
        return [
            await self.record(automation_type, d, tier=t, kind=k, rule=rule, count=n)
            for d, t, k, n in counts
        ]

    @abc.abstractmethod
    async def page(
        self, automation_type: str, *, after: str | None = None, limit: int = 50
    ) -> DomainPage:
        """The type's domains by name after ``after``, ``limit`` (1..500) of them."""

    @abc.abstractmethod
    async def set_tier(self, automation_type: str, domain: str, tier: int) -> DomainTier:
        """Put a domain at ``tier`` (an operator's choice; ``since`` now, window and
        streak start over; a new domain is created). ``tier`` >= 0."""

    @abc.abstractmethod
    async def forget(self, automation_type: str, domain: str) -> bool:
        """Drop what is known of a domain (it starts again at tier 0); False if unknown."""
