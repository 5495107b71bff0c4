"""KV, locks, counters, catalog and workers of the SQLite backend (configs: ``configs.py``).

A base class of :class:`fleet.backends.sqlite.SQLiteBackend` that holds the
small key-value-shaped parts of the interface, so the backend module keeps
to queues, streams, events and pools.
"""

from __future__ import annotations

from typing import Any

from fleet.backends.base import Backend
from fleet.backends.sqlite import state as st
from fleet.backends.sqlite.conn import SQLiteDB
from fleet.core.records import WorkerRecord, dumps, now
from fleet.core.stored import catalog_entry_of


class SQLitePrimitives(Backend):
    """The primitive and fleet-state methods, over ``self._db``."""

    _db: SQLiteDB

    # ------------------------------------------------------------ kv
    async def kv_set(
        self, ns: str, key: str, value: str, *, ttl_seconds: float | None = None
    ) -> None:
        await self._db.write(lambda c: st.kv_set(c, ns, key, value, ttl_seconds, now()))

    async def kv_setnx(
        self, ns: str, key: str, value: str, *, ttl_seconds: float | None = None
    ) -> bool:
        return await self._db.write(lambda c: st.kv_setnx(c, ns, key, value, ttl_seconds, now()))

    async def kv_get(self, ns: str, key: str) -> str | None:
        return await self._db.read(lambda c: st.kv_get(c, ns, key, now()))

    async def kv_delete(self, ns: str, key: str) -> bool:
        return await self._db.write(lambda c: st.kv_delete(c, ns, key, now()))

    # ------------------------------------------------------------ locks
    async def lock_acquire(self, name: str, token: str, hold_seconds: float) -> bool:
        return await self._db.write(lambda c: st.lock_acquire(c, name, token, hold_seconds, now()))

    async def lock_renew(self, name: str, token: str, hold_seconds: float) -> bool:
        return await self._db.write(lambda c: st.lock_renew(c, name, token, hold_seconds, now()))

    async def lock_release(self, name: str, token: str) -> bool:
        return await self._db.write(lambda c: st.lock_release(c, name, token, now()))

    # ------------------------------------------------------------ counters
    async def counter_incr(self, name: str, n: int = 1) -> int:
        return await self._db.write(lambda c: st.counter_incr(c, name, n))

    async def counter_get(self, name: str) -> int:
        return await self._db.read(lambda c: st.counter_get(c, name))

    async def counter_set(self, name: str, value: int) -> None:
        await self._db.write(
            lambda c: c.execute(
                "INSERT OR REPLACE INTO counters (name, value) VALUES (?, ?)", (name, value)
            )
        )

    async def counter_delete(self, name: str) -> None:
        await self._db.write(lambda c: c.execute("DELETE FROM counters WHERE name = ?", (name,)))

    # ------------------------------------------------------------ catalog
    async def catalog_put(self, automation_type: str, entry: dict[str, Any]) -> None:
        await self._db.write(
            lambda c: c.execute(
                "INSERT OR REPLACE INTO catalog (type, entry) VALUES (?, ?)",
                (automation_type, dumps(entry)),
            )
        )

    async def catalog_get(self, automation_type: str) -> dict[str, Any] | None:
        row = await self._db.read(
            lambda c: c.execute(
                "SELECT CAST(entry AS BLOB) FROM catalog WHERE type = ?", (automation_type,)
            ).fetchone()
        )
        return None if row is None else catalog_entry_of(automation_type, row[0])

    async def catalog_all(self) -> dict[str, dict[str, Any]]:
        # As bytes: one entry that is not UTF-8 must not fail the whole listing.
        found = await self._db.read(
            lambda c: c.execute(
                "SELECT type, CAST(entry AS BLOB) FROM catalog ORDER BY type"
            ).fetchall()
        )
        return {str(t): catalog_entry_of(str(t), raw) for t, raw in found}

    async def catalog_delete(self, automation_type: str) -> None:
        await self._db.write(
            lambda c: c.execute("DELETE FROM catalog WHERE type = ?", (automation_type,))
        )

    # ------------------------------------------------------------ workers
    async def worker_register(
        self, automation_type: str, worker_id: str, hardware: dict[str, Any]
    ) -> None:
        await self._db.write(lambda c: st.worker_register(c, automation_type, worker_id, hardware))

    async def worker_set_state(
        self, automation_type: str, worker_id: str, fields: dict[str, str]
    ) -> None:
        await self._db.write(lambda c: st.worker_set_state(c, automation_type, worker_id, fields))

    async def worker_put_stats(
        self, automation_type: str, worker_id: str, stats: dict[str, Any]
    ) -> None:
        await self._db.write(
            lambda c: st.worker_upsert(c, automation_type, worker_id, "stats", dumps(stats))
        )

    async def worker_get(self, automation_type: str, worker_id: str) -> WorkerRecord | None:
        return await self._db.read(lambda c: st.worker_get(c, automation_type, worker_id))

    async def worker_ids(self, automation_type: str) -> list[str]:
        found = await self._db.read(
            lambda c: c.execute(
                "SELECT id FROM workers WHERE type = ? AND registered = 1 ORDER BY id",
                (automation_type,),
            ).fetchall()
        )
        return [str(i) for (i,) in found]

    async def workers_all(self) -> list[tuple[str, str]]:
        found = await self._db.read(
            lambda c: c.execute(
                "SELECT type, id FROM workers WHERE registered = 1 ORDER BY type, id"
            ).fetchall()
        )
        return [(str(t), str(i)) for t, i in found]

    async def worker_forget(self, automation_type: str, worker_id: str) -> None:
        await self._db.write(
            lambda c: c.execute(
                "DELETE FROM workers WHERE type = ? AND id = ?", (automation_type, worker_id)
            )
        )
