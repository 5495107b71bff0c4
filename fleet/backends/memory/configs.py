"""Configs of the memory backend: partial configs with the generation they were
stored at, the generation counter and each worker's desired config. Each method is
one synchronous step on the shared store, so atomic under asyncio."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fleet.backends.memory.store import MemoryStore
from fleet.core.capabilities.configs import Configs
from fleet.core.config_book import ConfigBook
from fleet.core.records import dumps
from fleet.core.stored import config_of, desired_config

#: The worker id under which the type-wide config's generation is kept.
TYPE_WIDE = ""


class MemoryConfigs(Configs):
    """The configs of a memory store: one synchronous step each."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    async def get(self, automation_type: str, worker_id: str | None = None) -> dict[str, Any]:
        if worker_id is None:
            raw = self._store.config.get(automation_type)
        else:
            raw = self._store.overrides.get((automation_type, worker_id))
        return config_of(raw)

    async def set(
        self, automation_type: str, config: dict[str, Any], worker_id: str | None = None
    ) -> None:
        if worker_id is None:
            self._store.config[automation_type] = dumps(config)
        else:
            self._store.overrides[(automation_type, worker_id)] = dumps(config)

    async def publish(
        self,
        automation_type: str,
        config: dict[str, Any],
        worker_id: str | None = None,
        *,
        floor: int = 0,
    ) -> int:
        gen = await self.next_generation(automation_type, floor=floor)
        await self.set(automation_type, config, worker_id)
        self._store.config_gens[(automation_type, worker_id or TYPE_WIDE)] = gen
        return gen

    async def book(self, automation_type: str, worker_ids: Sequence[str]) -> ConfigBook:
        store = self._store
        overrides: dict[str, tuple[dict[str, Any], int]] = {}
        for wid in worker_ids:
            raw = store.overrides.get((automation_type, wid))
            if raw is not None:
                gen = store.config_gens.get((automation_type, wid), 0)
                overrides[wid] = (config_of(raw), gen)
        return ConfigBook(
            config_of(store.config.get(automation_type)),
            store.config_gens.get((automation_type, TYPE_WIDE), 0),
            overrides,
        )

    async def next_generation(self, automation_type: str, *, floor: int = 0) -> int:
        gen = max(self._store.generations.get(automation_type, 0), floor) + 1
        self._store.generations[automation_type] = gen
        return gen

    async def put_desired(
        self, automation_type: str, worker_id: str, config: dict[str, Any], gen: int
    ) -> bool:
        w = self._store.worker(automation_type, worker_id)
        # A stored config or generation that cannot be read is replaced by any write.
        readable = w.config is None or desired_config(w.config, w.gen)[0] is not None
        if gen <= (w.gen if readable and isinstance(w.gen, int) else 0):
            return False
        w.config, w.gen = dumps(config), gen
        return True

    async def desired(
        self, automation_type: str, worker_id: str
    ) -> tuple[dict[str, Any] | None, int]:
        w = self._store.workers.get((automation_type, worker_id))
        if w is None:
            return None, 0
        return desired_config(w.config, w.gen)
