"""The catalog and the worker records of the SQLite backend (``backend.catalog``,
``backend.workers``; configs are in ``configs.py``): the SQL of each step, run
inside the caller's transaction, and the two capability objects."""

from __future__ import annotations

import sqlite3
from typing import Any

from fleet.backends.sqlite.conn import SQLiteDB
from fleet.core.capabilities import Catalog, Workers
from fleet.core.records import WorkerRecord, dumps
from fleet.core.stored import catalog_entry_of, worker_record


# ------------------------------------------------------------------ workers
def worker_upsert(
    conn: sqlite3.Connection, automation_type: str, worker_id: str, column: str, value: Any
) -> None:
    """Set one column of a worker's row, creating the row if needed."""
    assert column in {"hardware", "stats", "state"}, column
    conn.execute(
        f"INSERT INTO workers (type, id, {column}) VALUES (?, ?, ?) "
        f"ON CONFLICT (type, id) DO UPDATE SET {column} = excluded.{column}",
        (automation_type, worker_id, value),
    )


def worker_register(
    conn: sqlite3.Connection, automation_type: str, worker_id: str, hardware: dict[str, Any]
) -> None:
    worker_upsert(conn, automation_type, worker_id, "hardware", dumps(hardware))
    conn.execute(
        "UPDATE workers SET registered = 1 WHERE type = ? AND id = ?", (automation_type, worker_id)
    )


def worker_set_state(
    conn: sqlite3.Connection, automation_type: str, worker_id: str, fields: dict[str, str]
) -> None:
    row = conn.execute(
        "SELECT CAST(state AS BLOB) FROM workers WHERE type = ? AND id = ?",
        (automation_type, worker_id),
    ).fetchone()
    # A stored state that cannot be read is replaced (the heartbeat writes every field).
    state = worker_record(automation_type, worker_id, state=row[0] if row else None).state
    state.update({str(k): str(v) for k, v in fields.items()})
    worker_upsert(conn, automation_type, worker_id, "state", dumps(state))


def worker_get(
    conn: sqlite3.Connection, automation_type: str, worker_id: str
) -> WorkerRecord | None:
    # As bytes: a value that is not UTF-8 must fail only its own part, not the read.
    row = conn.execute(
        "SELECT CAST(hardware AS BLOB), CAST(config AS BLOB), "
        "CASE typeof(gen) WHEN 'integer' THEN gen ELSE CAST(gen AS BLOB) END, "
        "CAST(state AS BLOB), CAST(stats AS BLOB) FROM workers WHERE type = ? AND id = ?",
        (automation_type, worker_id),
    ).fetchone()
    if row is None:
        return None
    hardware, config, gen, state, stats = row
    return worker_record(
        automation_type,
        worker_id,
        hardware=hardware,
        config=config,
        gen=gen,
        state=state,
        stats=stats,
    )


class SQLiteCatalog(Catalog):
    """Catalog entries (table ``catalog``), read as bytes so one bad entry is
    marked unreadable alone."""

    def __init__(self, db: SQLiteDB) -> None:
        self._db = db

    async def put(self, automation_type: str, entry: dict[str, Any]) -> None:
        await self._db.write(
            lambda c: c.execute(
                "INSERT OR REPLACE INTO catalog (type, entry) VALUES (?, ?)",
                (automation_type, dumps(entry)),
            )
        )

    async def get(self, automation_type: str) -> dict[str, Any] | None:
        row = await self._db.read(
            lambda c: c.execute(
                "SELECT CAST(entry AS BLOB) FROM catalog WHERE type = ?", (automation_type,)
            ).fetchone()
        )
        return None if row is None else catalog_entry_of(automation_type, row[0])

    async def all(self) -> dict[str, dict[str, Any]]:
        # As bytes: one entry that is not UTF-8 must not fail the whole listing.
        found = await self._db.read(
            lambda c: c.execute(
                "SELECT type, CAST(entry AS BLOB) FROM catalog ORDER BY type"
            ).fetchall()
        )
        return {str(t): catalog_entry_of(str(t), raw) for t, raw in found}

    async def delete(self, automation_type: str) -> None:
        await self._db.write(
            lambda c: c.execute("DELETE FROM catalog WHERE type = ?", (automation_type,))
        )


class SQLiteWorkers(Workers):
    """Worker records (table ``workers``; ``registered`` marks the indexed ones)."""

    def __init__(self, db: SQLiteDB) -> None:
        self._db = db

    async def register(
        self, automation_type: str, worker_id: str, hardware: dict[str, Any]
    ) -> None:
        await self._db.write(lambda c: worker_register(c, automation_type, worker_id, hardware))

    async def set_state(self, automation_type: str, worker_id: str, fields: dict[str, str]) -> None:
        await self._db.write(lambda c: worker_set_state(c, automation_type, worker_id, fields))

    async def put_stats(self, automation_type: str, worker_id: str, stats: dict[str, Any]) -> None:
        await self._db.write(
            lambda c: worker_upsert(c, automation_type, worker_id, "stats", dumps(stats))
        )

    async def get(self, automation_type: str, worker_id: str) -> WorkerRecord | None:
        return await self._db.read(lambda c: worker_get(c, automation_type, worker_id))

    async def ids(self, automation_type: str) -> list[str]:
        found = await self._db.read(
            lambda c: c.execute(
                "SELECT id FROM workers WHERE type = ? AND registered = 1 ORDER BY id",
                (automation_type,),
            ).fetchall()
        )
        return [str(i) for (i,) in found]

    async def all(self) -> list[tuple[str, str]]:
        found = await self._db.read(
            lambda c: c.execute(
                "SELECT type, id FROM workers WHERE registered = 1 ORDER BY type, id"
            ).fetchall()
        )
        return [(str(t), str(i)) for t, i in found]

    async def forget(self, automation_type: str, worker_id: str) -> None:
        await self._db.write(
            lambda c: c.execute(
                "DELETE FROM workers WHERE type = ? AND id = ?", (automation_type, worker_id)
            )
        )
