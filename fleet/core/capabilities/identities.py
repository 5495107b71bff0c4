"""Identity pools: identities leased fleet-wide, exclusive (up to a concurrency), sticky
by key, cooled down and retired as a unit (:mod:`fleet.core.identities` holds the
record and the rules every backend follows)."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

from fleet.core.identities import (
    DEFAULT_COOLDOWN_SECONDS,
    DEFAULT_LEASE_SECONDS,
    DEFAULT_RETIRE_AFTER,
    Identity,
    IdentityLease,
    IdentityPage,
    LeaseOutcome,
)


class Identities(abc.ABC):
    """Named identity pools (``backend.identities``)."""

    @abc.abstractmethod
    async def put(self, pool: str, identities: Sequence[Identity]) -> int:
        """Add identities, or replace the documents (proxy, fingerprint, cookies,
        account) of those whose id exists (their state, stats and leases stay), in one
        atomic step; the pool exists from its first put. Returns how many were new."""

    @abc.abstractmethod
    async def get(self, pool: str, identity_id: str) -> Identity | None:
        """One identity with its state at now and its stats; None if unknown."""

    @abc.abstractmethod
    async def page(self, pool: str, *, after: str | None = None, limit: int = 50) -> IdentityPage:
        """Identities by id after ``after``, ``limit`` (1..500) of them, and the pool's
        counts by state."""

    @abc.abstractmethod
    async def pools(self) -> list[str]:
        """Every pool that holds an identity, by name."""

    @abc.abstractmethod
    async def lease(
        self,
        pool: str,
        *,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        max_concurrency: int = 1,
        key: str | None = None,
    ) -> IdentityLease | None:
        """Lease one identity in one atomic step, or None if none is usable now.

        Leases past their deadline are ended first (a worker that died gives its
        identities back within ``lease_seconds``). Without ``key``: the usable identity
        first in the pool's order (:mod:`fleet.core.identities`). With ``key``: the
        identity kept for it, if it is usable (None while it is cooling or at
        ``max_concurrency``: wait for it); a key with none, or whose identity was
        retired or deleted, takes the next usable one and keeps it. A lease counts a
        use and sets ``last_used_at``."""

    @abc.abstractmethod
    async def renew(self, pool: str, identity_id: str, token: str, lease_seconds: float) -> bool:
        """Push a held lease's deadline to now + ``lease_seconds``; False if it is lost."""

    @abc.abstractmethod
    async def release(
        self,
        pool: str,
        identity_id: str,
        token: str,
        *,
        outcome: LeaseOutcome = "none",
        reason: str | None = None,
        cookies: Sequence[dict[str, Any]] | None = None,
        account: dict[str, Any] | None = None,
        cooldown_seconds: float = DEFAULT_COOLDOWN_SECONDS,
        retire_after: int = DEFAULT_RETIRE_AFTER,
    ) -> bool:
        """End a lease in one atomic step; False (and no change) if ``token`` no longer
        holds it. ``cookies`` merge into the jar (:func:`fleet.core.identities.merged_cookies`),
        ``account`` replaces the stored one. ``ok`` resets the blocks in a row; ``blocked``
        cools the identity down for ``cooldown_seconds`` (or retires it at
        ``retire_after`` blocks in a row), with ``reason``."""

    @abc.abstractmethod
    async def retire(self, pool: str, identity_id: str, reason: str | None = None) -> bool:
        """Retire an identity for good (leases held end at their release); False if unknown."""

    @abc.abstractmethod
    async def revive(self, pool: str, identity_id: str) -> bool:
        """Bring a retired or cooling identity back to ready (blocks in a row 0);
        False if unknown."""

    @abc.abstractmethod
    async def delete(self, pool: str, identity_id: str) -> bool:
        """Remove an identity (its leases and sticky keys go with it); False if unknown."""
