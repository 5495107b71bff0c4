"""Primitives: KV, locks and counters shared by the fleet, one small object each
(``backend.kv``, ``backend.locks``, ``backend.counters``)."""

from __future__ import annotations

import abc


class KV(abc.ABC):
    """``ctx.kv`` (and the control flags): namespaced string values with a TTL."""

    @abc.abstractmethod
    async def set(self, ns: str, key: str, value: str, *, ttl_seconds: float | None = None) -> None:
        """Store ``value`` under (ns, key), replacing any value and TTL."""

    @abc.abstractmethod
    async def setnx(
        self, ns: str, key: str, value: str, *, ttl_seconds: float | None = None
    ) -> bool:
        """Store only if absent (or expired); True if stored. Atomic across callers."""

    @abc.abstractmethod
    async def get(self, ns: str, key: str) -> str | None:
        """The live value, or None if absent or expired."""

    async def get_many(self, ns: str, keys: list[str]) -> list[str | None]:
        """:meth:`get` of each key, in order (one round trip where it can be)."""
        return [await self.get(ns, key) for key in keys]

    @abc.abstractmethod
    async def delete(self, ns: str, key: str) -> bool:
        """Delete; True if a live value existed."""


class Locks(abc.ABC):
    """``ctx.lock``: fleet-wide mutexes held under a token for a while."""

    @abc.abstractmethod
    async def acquire(self, name: str, token: str, hold_seconds: float) -> bool:
        """Take the lock for ``hold_seconds`` if free (or expired); True if taken.
        Never waits: waiting and renewal live in the lock handle."""

    @abc.abstractmethod
    async def renew(self, name: str, token: str, hold_seconds: float) -> bool:
        """Extend the lock to now + ``hold_seconds`` if ``token`` holds it."""

    @abc.abstractmethod
    async def release(self, name: str, token: str) -> bool:
        """Free the lock only if ``token`` holds it; True if it did."""


class Counters(abc.ABC):
    """``ctx.counter``: fleet-wide integers."""

    @abc.abstractmethod
    async def incr(self, name: str, n: int = 1) -> int:
        """Add ``n`` (may be negative) atomically; returns the new value (absent = 0)."""

    @abc.abstractmethod
    async def get(self, name: str) -> int:
        """The value (0 if absent)."""

    @abc.abstractmethod
    async def set(self, name: str, value: int) -> None:
        """Set the value."""

    @abc.abstractmethod
    async def delete(self, name: str) -> None:
        """Delete the counter (it reads 0 afterwards)."""
