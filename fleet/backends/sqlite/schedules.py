"""Schedules on SQLite: table ``schedules`` (schema version 6), one row per
schedule with its record and its due time (NULL: not indexed, never fires); the
partial index on ``due`` makes "what is due now" one ordered probe."""

from __future__ import annotations

import sqlite3

from fleet.backends.sqlite.conn import SQLiteDB
from fleet.core.capabilities.schedules import ScheduleStore


def put(
    conn: sqlite3.Connection, automation_type: str, sid: str, raw: str, due: float | None
) -> None:
    conn.execute(
        "INSERT INTO schedules (type, id, raw, due) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (type, id) DO UPDATE SET raw = excluded.raw, due = excluded.due",
        (automation_type, sid, raw, due),
    )


def swap(
    conn: sqlite3.Connection,
    automation_type: str,
    sid: str,
    expected: str,
    raw: str,
    due: float | None,
) -> bool:
    cur = conn.execute(
        "UPDATE schedules SET raw = ?, due = ? WHERE type = ? AND id = ? AND raw = ?",
        (raw, due, automation_type, sid, expected),
    )
    return cur.rowcount == 1


class SQLiteSchedules(ScheduleStore):
    """The :class:`~fleet.core.capabilities.ScheduleStore` primitives on SQLite."""

    def __init__(self, db: SQLiteDB) -> None:
        self._db = db

    async def put_raw(
        self, automation_type: str, schedule_id: str, raw: str, due: float | None
    ) -> None:
        await self._db.write(lambda c: put(c, automation_type, schedule_id, raw, due))

    async def swap_raw(
        self, automation_type: str, schedule_id: str, expected: str, raw: str, due: float | None
    ) -> bool:
        return await self._db.write(
            lambda c: swap(c, automation_type, schedule_id, expected, raw, due)
        )

    async def get_raw(self, automation_type: str, schedule_id: str) -> str | None:
        def get(c: sqlite3.Connection) -> str | None:
            row = c.execute(
                "SELECT raw FROM schedules WHERE type = ? AND id = ?",
                (automation_type, schedule_id),
            ).fetchone()
            return None if row is None else str(row[0])

        return await self._db.read(get)

    async def listing_raw(self, automation_type: str) -> dict[str, str]:
        def rows(c: sqlite3.Connection) -> dict[str, str]:
            found = c.execute(
                "SELECT id, raw FROM schedules WHERE type = ? ORDER BY id", (automation_type,)
            )
            return {str(sid): str(raw) for sid, raw in found}

        return await self._db.read(rows)

    async def delete(self, automation_type: str, schedule_id: str) -> bool:
        def delete(c: sqlite3.Connection) -> bool:
            cur = c.execute(
                "DELETE FROM schedules WHERE type = ? AND id = ?", (automation_type, schedule_id)
            )
            return cur.rowcount == 1

        return await self._db.write(delete)

    async def due_raw(self, now: float, limit: int = 100) -> list[tuple[str, str, str]]:
        def due(c: sqlite3.Connection) -> list[tuple[str, str, str]]:
            found = c.execute(
                "SELECT type, id, raw FROM schedules INDEXED BY schedules_due "
                "WHERE due IS NOT NULL AND due <= ? ORDER BY due LIMIT ?",
                (now, max(1, int(limit))),
            )
            return [(str(t), str(sid), str(raw)) for t, sid, raw in found]

        return await self._db.read(due)

    async def next_due(self) -> float | None:
        def first(c: sqlite3.Connection) -> float | None:
            row = c.execute(
                "SELECT MIN(due) FROM schedules INDEXED BY schedules_due WHERE due IS NOT NULL"
            ).fetchone()
            return None if row is None or row[0] is None else float(row[0])

        return await self._db.read(first)
