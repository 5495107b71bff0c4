"""Fleet state: the catalog and the worker records (configs: ``configs.py``)."""

from __future__ import annotations

import abc
from typing import Any

from fleet.core.records import WorkerRecord


class FleetState(abc.ABC):
    """What workers and masters tell each other about the fleet."""

    @abc.abstractmethod
    async def catalog_put(self, automation_type: str, entry: dict[str, Any]) -> None:
        """Write one catalog entry (``fleet:catalog`` hash field)."""

    @abc.abstractmethod
    async def catalog_get(self, automation_type: str) -> dict[str, Any] | None:
        """One catalog entry or None."""

    @abc.abstractmethod
    async def catalog_all(self) -> dict[str, dict[str, Any]]:
        """Every catalog entry by type."""

    @abc.abstractmethod
    async def catalog_delete(self, automation_type: str) -> None:
        """Remove one catalog entry."""

    # ------------------------------------------------------------ workers
    @abc.abstractmethod
    async def worker_register(
        self, automation_type: str, worker_id: str, hardware: dict[str, Any]
    ) -> None:
        """Write ``wkr:<type>:<id>:hardware`` and add the id to ``wkrs:<type>`` and
        ``<type>|<id>`` to ``wkrs:all``."""

    @abc.abstractmethod
    async def worker_set_state(
        self, automation_type: str, worker_id: str, fields: dict[str, str]
    ) -> None:
        """Merge fields into ``wkr:<type>:<id>:state`` (state, last_seen, ...)."""

    @abc.abstractmethod
    async def worker_put_stats(
        self, automation_type: str, worker_id: str, stats: dict[str, Any]
    ) -> None:
        """Replace ``wkr:<type>:<id>:stats`` with the JSON stats frame."""

    @abc.abstractmethod
    async def worker_get(self, automation_type: str, worker_id: str) -> WorkerRecord | None:
        """Everything about one worker, or None if it was never registered."""

    async def workers_get(self, pairs: list[tuple[str, str]]) -> list[WorkerRecord | None]:
        """:meth:`worker_get` of each ``(type, worker_id)``, in order. Backends whose
        reads cost a round trip each answer them all in one (a view of 1,000 workers)."""
        return [await self.worker_get(t, wid) for t, wid in pairs]

    @abc.abstractmethod
    async def worker_ids(self, automation_type: str) -> list[str]:
        """Every worker id ever registered for the type (``wkrs:<type>``), sorted."""

    @abc.abstractmethod
    async def workers_all(self) -> list[tuple[str, str]]:
        """Every ``(type, worker_id)`` in ``wkrs:all``, sorted."""

    @abc.abstractmethod
    async def worker_forget(self, automation_type: str, worker_id: str) -> None:
        """Delete the worker's ``wkr:`` keys and its index entries."""
