"""The simple records of the memory backend: kv, locks, counters, catalog and
workers (configs: ``configs.py``). A mixin of :class:`fleet.backends.memory.MemoryBackend`;
each method is one synchronous step on the shared store, so atomic under asyncio.
"""

from __future__ import annotations

from typing import Any

from fleet.backends.memory.store import MemoryStore
from fleet.core.records import WorkerRecord, dumps, now
from fleet.core.stored import catalog_entry_of, worker_record


def _kv_key(ns: str, key: str) -> str:
    return f"{ns}\0{key}"


class MemoryRecordsMixin:
    """kv, locks, counters, catalog and worker registry over ``_store``."""

    _store: MemoryStore

    # ------------------------------------------------------------ kv
    async def kv_set(
        self, ns: str, key: str, value: str, *, ttl_seconds: float | None = None
    ) -> None:
        self._store.kv.set(_kv_key(ns, key), value, ttl_seconds, now())

    async def kv_setnx(
        self, ns: str, key: str, value: str, *, ttl_seconds: float | None = None
    ) -> bool:
        t = now()
        k = _kv_key(ns, key)
        if self._store.kv.get(k, t) is not None:
            return False
        self._store.kv.set(k, value, ttl_seconds, t)
        return True

    async def kv_get(self, ns: str, key: str) -> str | None:
        return self._store.kv.get(_kv_key(ns, key), now())

    async def kv_delete(self, ns: str, key: str) -> bool:
        return self._store.kv.delete(_kv_key(ns, key), now())

    # ------------------------------------------------------------ locks
    async def lock_acquire(self, name: str, token: str, hold_seconds: float) -> bool:
        t = now()
        if self._store.locks.get(name, t) is not None:
            return False
        self._store.locks.set(name, token, hold_seconds, t)
        return True

    async def lock_renew(self, name: str, token: str, hold_seconds: float) -> bool:
        t = now()
        if self._store.locks.get(name, t) != token:
            return False
        self._store.locks.set(name, token, hold_seconds, t)
        return True

    async def lock_release(self, name: str, token: str) -> bool:
        t = now()
        if self._store.locks.get(name, t) != token:
            return False
        return self._store.locks.delete(name, t)

    # ------------------------------------------------------------ counters
    async def counter_incr(self, name: str, n: int = 1) -> int:
        value = self._store.counters.get(name, 0) + n
        self._store.counters[name] = value
        return value

    async def counter_get(self, name: str) -> int:
        return self._store.counters.get(name, 0)

    async def counter_set(self, name: str, value: int) -> None:
        self._store.counters[name] = int(value)

    async def counter_delete(self, name: str) -> None:
        self._store.counters.pop(name, None)

    # ------------------------------------------------------------ catalog
    async def catalog_put(self, automation_type: str, entry: dict[str, Any]) -> None:
        self._store.catalog[automation_type] = dumps(entry)

    async def catalog_get(self, automation_type: str) -> dict[str, Any] | None:
        raw = self._store.catalog.get(automation_type)
        return None if raw is None else catalog_entry_of(automation_type, raw)

    async def catalog_all(self) -> dict[str, dict[str, Any]]:
        return {t: catalog_entry_of(t, raw) for t, raw in self._store.catalog.items()}

    async def catalog_delete(self, automation_type: str) -> None:
        self._store.catalog.pop(automation_type, None)

    # ------------------------------------------------------------ workers
    async def worker_register(
        self, automation_type: str, worker_id: str, hardware: dict[str, Any]
    ) -> None:
        self._store.worker(automation_type, worker_id).hardware = dumps(hardware)
        self._store.worker_index.setdefault(automation_type, set()).add(worker_id)
        self._store.workers_all.add((automation_type, worker_id))

    async def worker_set_state(
        self, automation_type: str, worker_id: str, fields: dict[str, str]
    ) -> None:
        w = self._store.worker(automation_type, worker_id)
        if not isinstance(w.state, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in w.state.items()
        ):
            w.state = {}  # one that cannot be read is replaced (the heartbeat writes it all)
        w.state.update({str(k): str(v) for k, v in fields.items()})

    async def worker_put_stats(
        self, automation_type: str, worker_id: str, stats: dict[str, Any]
    ) -> None:
        self._store.worker(automation_type, worker_id).stats = dumps(stats)

    async def worker_get(self, automation_type: str, worker_id: str) -> WorkerRecord | None:
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

    async def worker_ids(self, automation_type: str) -> list[str]:
        return sorted(self._store.worker_index.get(automation_type, ()))

    async def workers_all(self) -> list[tuple[str, str]]:
        return sorted(self._store.workers_all)

    async def worker_forget(self, automation_type: str, worker_id: str) -> None:
        self._store.forget_worker(automation_type, worker_id)
