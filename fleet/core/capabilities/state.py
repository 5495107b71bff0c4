"""Fleet state: the catalog (``backend.catalog``) and the worker records
(``backend.workers``); configs are ``configs.py``."""

from __future__ import annotations

import abc
from typing import Any

from fleet.core.records import WorkerRecord


class Catalog(abc.ABC):
    """The catalog: one entry per automation type, written by its workers."""

    @abc.abstractmethod
    async def put(self, automation_type: str, entry: dict[str, Any]) -> None:
        """Write one catalog entry (``fleet:catalog`` hash field)."""

    @abc.abstractmethod
    async def get(self, automation_type: str) -> dict[str, Any] | None:
        """One catalog entry or None."""

    @abc.abstractmethod
    async def all(self) -> dict[str, dict[str, Any]]:
        """Every catalog entry by type."""

    @abc.abstractmethod
    async def delete(self, automation_type: str) -> None:
        """Remove one catalog entry."""


class Workers(abc.ABC):
    """The worker records: what each worker tells the fleet about itself."""

    @abc.abstractmethod
    async def register(
        self, automation_type: str, worker_id: str, hardware: dict[str, Any]
    ) -> None:
        """Write ``wkr:<type>:<id>:hardware`` and add the id to ``wkrs:<type>`` and
        ``<type>|<id>`` to ``wkrs:all``."""

    @abc.abstractmethod
    async def set_state(self, automation_type: str, worker_id: str, fields: dict[str, str]) -> None:
        """Merge fields into ``wkr:<type>:<id>:state`` (state, last_seen, ...)."""

    @abc.abstractmethod
    async def put_stats(self, automation_type: str, worker_id: str, stats: dict[str, Any]) -> None:
        """Replace ``wkr:<type>:<id>:stats`` with the JSON stats frame."""

    @abc.abstractmethod
    async def get(self, automation_type: str, worker_id: str) -> WorkerRecord | None:
        """Everything about one worker, or None if it was never registered."""

    async def get_many(self, pairs: list[tuple[str, str]]) -> list[WorkerRecord | None]:
        """:meth:`get` of each ``(type, worker_id)``, in order. Backends whose
        reads cost a round trip each answer them all in one (a view of 1,000 workers)."""
        return [await self.get(t, wid) for t, wid in pairs]

    @abc.abstractmethod
    async def ids(self, automation_type: str) -> list[str]:
        """Every worker id ever registered for the type (``wkrs:<type>``), sorted."""

    @abc.abstractmethod
    async def all(self) -> list[tuple[str, str]]:
        """Every ``(type, worker_id)`` in ``wkrs:all``, sorted."""

    @abc.abstractmethod
    async def forget(self, automation_type: str, worker_id: str) -> None:
        """Delete the worker's ``wkr:`` keys and its index entries."""
