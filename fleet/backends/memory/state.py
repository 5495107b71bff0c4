"""The catalog and the worker records of the memory backend (``backend.catalog``,
``backend.workers``); each method one synchronous step on the shared store."""

from __future__ import annotations

from typing import Any

from fleet.backends.memory.store import MemoryStore
from fleet.core.capabilities import Catalog, Workers
from fleet.core.records import WorkerRecord, dumps
from fleet.core.stored import catalog_entry_of, worker_record


class MemoryCatalog(Catalog):
    """Catalog entries stored as JSON text, decoded (or marked unreadable) on read."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    async def put(self, automation_type: str, entry: dict[str, Any]) -> None:
        self._store.catalog[automation_type] = dumps(entry)

    async def get(self, automation_type: str) -> dict[str, Any] | None:
        raw = self._store.catalog.get(automation_type)
        return None if raw is None else catalog_entry_of(automation_type, raw)

    async def all(self) -> dict[str, dict[str, Any]]:
        return {t: catalog_entry_of(t, raw) for t, raw in self._store.catalog.items()}

    async def delete(self, automation_type: str) -> None:
        self._store.catalog.pop(automation_type, None)


class MemoryWorkers(Workers):
    """Worker records and the two indexes (per type, fleet-wide)."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    async def register(
        self, automation_type: str, worker_id: str, hardware: dict[str, Any]
    ) -> None:
        self._store.worker(automation_type, worker_id).hardware = dumps(hardware)
        self._store.worker_index.setdefault(automation_type, set()).add(worker_id)
        self._store.workers_all.add((automation_type, worker_id))

    async def set_state(self, automation_type: str, worker_id: str, fields: dict[str, str]) -> None:
        w = self._store.worker(automation_type, worker_id)
        if not isinstance(w.state, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in w.state.items()
        ):
            w.state = {}  # one that cannot be read is replaced (the heartbeat writes it all)
        w.state.update({str(k): str(v) for k, v in fields.items()})

    async def put_stats(self, automation_type: str, worker_id: str, stats: dict[str, Any]) -> None:
        self._store.worker(automation_type, worker_id).stats = dumps(stats)

    async def get(self, automation_type: str, worker_id: str) -> WorkerRecord | None:
        w = self._store.workers.get((automation_type, worker_id))
        if w is None:
            return None
        return worker_record(
            automation_type,
            worker_id,
            hardware=w.hardware,
            config=w.config,
            gen=w.gen,
            state=w.state,
            stats=w.stats,
        )

    async def ids(self, automation_type: str) -> list[str]:
        return sorted(self._store.worker_index.get(automation_type, ()))

    async def all(self) -> list[tuple[str, str]]:
        return sorted(self._store.workers_all)

    async def forget(self, automation_type: str, worker_id: str) -> None:
        self._store.forget_worker(automation_type, worker_id)
