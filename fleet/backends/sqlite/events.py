"""Events of the SQLite backend (``backend.events``): an append-only table that
every process's watcher polls (see :mod:`fleet.backends.sqlite.watch`)."""

from __future__ import annotations

import sqlite3
from typing import Any

from fleet.backends.sqlite.conn import SQLiteDB
from fleet.backends.sqlite.watch import SQLiteSubscription, Watcher
from fleet.core.capabilities import Events
from fleet.core.records import dumps, now

#: Events older than this are deleted by the next publish (subscribers poll
#: every few tens of milliseconds, so they have long seen them).
EVENT_RETENTION_SECONDS = 60.0


# ------------------------------------------------------------------ events
def publish(conn: sqlite3.Connection, topic: str, message: Any, now: float) -> int:
    """Append an event (and drop old ones); its sequence number."""
    row = conn.execute(
        "INSERT INTO events (topic, message, ts) VALUES (?, ?, ?) RETURNING seq",
        (topic, dumps(message), now),
    ).fetchone()
    conn.execute("DELETE FROM events WHERE ts < ?", (now - EVENT_RETENTION_SECONDS,))
    return int(row[0])


class SQLiteEvents(Events):
    """Publish: one row and a kick of this process's watcher; subscribe: through
    the watcher, which polls the table for every process."""

    def __init__(self, db: SQLiteDB, watcher: Watcher) -> None:
        self._db = db
        self._watcher = watcher

    async def publish(self, topic: str, message: Any) -> None:
        await self._db.write(lambda c: publish(c, topic, message, now()))
        self._watcher.kick()

    async def subscribe(self, *topics: str) -> SQLiteSubscription:
        return await self._watcher.subscribe(frozenset(topics))
