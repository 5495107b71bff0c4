"""Configs: the type-wide config and per-worker overrides, each stored with the
generation it was set at, and each worker's desired config (docs/protocol.md
"Config and generations")."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

from fleet.core.config_book import ConfigBook


class Configs(abc.ABC):
    """Where configs and their generations live.

    A PATCH is one :meth:`publish` whatever the number of workers; each
    worker reads its two layers with :meth:`book`, merges them and writes
    its own desired config with :meth:`put_desired` (only the worker writes
    ``wkr:<type>:<id>:config``/``gen``).
    """

    @abc.abstractmethod
    async def get(self, automation_type: str, worker_id: str | None = None) -> dict[str, Any]:
        """The stored type-wide config (``worker_id`` None) or one worker's override
        ({} if none). These are partial dicts; merging is the caller's job."""

    @abc.abstractmethod
    async def set(
        self, automation_type: str, config: dict[str, Any], worker_id: str | None = None
    ) -> None:
        """Replace the type-wide config or one worker's override, keeping the
        generation it was stored at (a worker putting back what was lost)."""

    @abc.abstractmethod
    async def publish(
        self,
        automation_type: str,
        config: dict[str, Any],
        worker_id: str | None = None,
        *,
        floor: int = 0,
    ) -> int:
        """Take the type's next generation (as :meth:`next_generation`) and store the
        type-wide config (``worker_id`` None) or one worker's override at it, in
        one atomic step; returns the generation."""

    @abc.abstractmethod
    async def book(self, automation_type: str, worker_ids: Sequence[str]) -> ConfigBook:
        """The type-wide config and the overrides of ``worker_ids``, each with its
        generation, read together (one round trip, whatever the number of ids)."""

    @abc.abstractmethod
    async def next_generation(self, automation_type: str, *, floor: int = 0) -> int:
        """Increment and return the type's config generation counter, raised first to
        ``floor`` if it is below. Generations are unique and strictly increasing per
        type, across masters; ``floor`` (the highest generation a live worker holds)
        keeps them from going backwards after the backend lost its data."""

    @abc.abstractmethod
    async def put_desired(
        self, automation_type: str, worker_id: str, config: dict[str, Any], gen: int
    ) -> bool:
        """Write the desired merged config and its generation to
        ``wkr:<type>:<id>:config`` / ``:gen`` if ``gen`` is higher than the stored
        one; True if written. Atomic (config and gen change together)."""

    @abc.abstractmethod
    async def desired(
        self, automation_type: str, worker_id: str
    ) -> tuple[dict[str, Any] | None, int]:
        """The desired merged config of a worker and its generation (None, 0 if none)."""
