"""Output streams of the SQLite backend (``backend.streams``): the SQL of each step
(run inside the caller's transaction) and :class:`SQLiteStreams`."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from fleet.backends.sqlite import records
from fleet.backends.sqlite.conn import SQLiteDB
from fleet.backends.sqlite.events import publish
from fleet.backends.sqlite.watch import Watcher
from fleet.core.capabilities import Streams
from fleet.core.capabilities.streams import STREAM_MAX_AGE, STREAM_MAX_LEN
from fleet.core.records import StreamEntry, dumps, now, stream_entry_id
from fleet.core.results import json_size, output_record, progress_record, progress_topic
from fleet.protocol import emit_topic

# ------------------------------------------------------------------ streams
#: The columns of a stream entry, in :func:`_entry`'s order.
_ENTRY = "id, ts, worker_id, payload, task_id, attempt"


def _entry(row: tuple[str, float, str, str, str | None, int | None]) -> StreamEntry:
    return StreamEntry(
        id=row[0],
        ts=row[1],
        worker_id=row[2],
        payload=json.loads(row[3]),
        task_id=row[4],
        attempt=row[5],
    )


def _add_len(conn: sqlite3.Connection, automation_type: str, n: int) -> int:
    row = conn.execute(
        "INSERT INTO stream_len (type, n) VALUES (?, ?) "
        "ON CONFLICT (type) DO UPDATE SET n = MAX(n + excluded.n, 0) RETURNING n",
        (automation_type, n),
    ).fetchone()
    return int(row[0])


def id_floor(ts: float) -> str:
    """The smallest stream entry id at time ``ts`` (ids sort by time)."""
    return f"{max(int(ts * 1_000_000), 0):016x}"


def stream_push(
    conn: sqlite3.Connection,
    automation_type: str,
    payload: Any,
    *,
    worker_id: str,
    max_len: int,
    max_age: float,
    now: float,
    task_id: str | None = None,
    attempt: int | None = None,
) -> StreamEntry:
    """Append an entry, trim by age and length, publish ``<type>.emit``."""
    entry = StreamEntry(
        id=stream_entry_id(now),
        ts=now,
        worker_id=worker_id,
        payload=payload,
        task_id=task_id,
        attempt=attempt,
    )
    conn.execute(
        "INSERT INTO stream (type, id, ts, worker_id, payload, task_id, attempt) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (automation_type, entry.id, entry.ts, worker_id, dumps(payload), task_id, attempt),
    )
    gone = conn.execute(
        "DELETE FROM stream WHERE type = ? AND id < ?", (automation_type, id_floor(now - max_age))
    ).rowcount
    size = _add_len(conn, automation_type, 1 - gone)
    if size > max_len:
        conn.execute(
            "DELETE FROM stream WHERE type = ? AND id IN "
            "(SELECT id FROM stream WHERE type = ? ORDER BY id LIMIT ?)",
            (automation_type, automation_type, size - max_len),
        )
        _add_len(conn, automation_type, max_len - size)
    publish(conn, emit_topic(automation_type), entry.to_dict(), now)
    return entry


def stream_pop(conn: sqlite3.Connection, automation_type: str, n: int) -> list[StreamEntry]:
    """Remove and return the ``n`` oldest entries."""
    found = conn.execute(
        "DELETE FROM stream WHERE type = ? AND id IN "
        "(SELECT id FROM stream WHERE type = ? ORDER BY id LIMIT ?) "
        f"RETURNING {_ENTRY}",
        (automation_type, automation_type, n),
    ).fetchall()
    if found:
        _add_len(conn, automation_type, -len(found))
    return sorted((_entry(row) for row in found), key=lambda e: e.id)


def stream_range(
    conn: sqlite3.Connection, automation_type: str, *, after: str | None, n: int, newest: bool
) -> list[StreamEntry]:
    """Entries oldest first: the ``n`` oldest after ``after``, or the ``n`` newest."""
    if newest:
        found = conn.execute(
            f"SELECT {_ENTRY} FROM stream WHERE type = ? ORDER BY id DESC LIMIT ?",
            (automation_type, n),
        ).fetchall()
        found.reverse()
    else:
        found = conn.execute(
            f"SELECT {_ENTRY} FROM stream WHERE type = ? AND id > ? ORDER BY id LIMIT ?",
            (automation_type, after or "", n),
        ).fetchall()
    return [_entry(row) for row in found]


def stream_len(conn: sqlite3.Connection, automation_type: str) -> int:
    """The maintained entry count of a stream."""
    row = conn.execute("SELECT n FROM stream_len WHERE type = ?", (automation_type,)).fetchone()
    return int(row[0]) if row else 0


class SQLiteStreams(Streams):
    """Streams over the database; a push or a progress report wakes the watchers
    (subscribers of ``<type>.emit`` / ``<type>.progress``)."""

    def __init__(self, db: SQLiteDB, watcher: Watcher) -> None:
        self._db = db
        self._watcher = watcher

    async def push(
        self,
        automation_type: str,
        payload: Any,
        *,
        worker_id: str,
        max_len: int = STREAM_MAX_LEN,
        max_age: float = STREAM_MAX_AGE,
        task_id: str | None = None,
        attempt: int | None = None,
    ) -> StreamEntry:
        def push(c: sqlite3.Connection) -> StreamEntry:
            entry = stream_push(
                c,
                automation_type,
                payload,
                worker_id=worker_id,
                max_len=max_len,
                max_age=max_age,
                now=now(),
                task_id=task_id,
                attempt=attempt,
            )
            if task_id is not None:
                size = json_size(dumps(entry.payload))
                output = output_record(entry.id, entry.ts, attempt, entry.payload, size)
                records.add_output(c, automation_type, task_id, output, entry.ts)
            return entry

        entry = await self._db.write(push)
        self._watcher.kick()
        return entry

    async def progress(
        self,
        automation_type: str,
        task_id: str,
        *,
        attempt: int,
        fraction: float | None,
        message: str | None,
    ) -> None:
        def report(c: sqlite3.Connection) -> None:
            t = now()
            progress = progress_record(fraction, message, attempt, t)
            records.set_progress(c, automation_type, task_id, progress, t)
            publish(c, progress_topic(automation_type), {"task_id": task_id, **progress}, t)

        await self._db.write(report)
        self._watcher.kick()

    async def pop(self, automation_type: str, n: int = 1) -> list[StreamEntry]:
        return await self._db.write(lambda c: stream_pop(c, automation_type, n))

    async def peek(self, automation_type: str, n: int = 10) -> list[StreamEntry]:
        return await self._db.read(
            lambda c: stream_range(c, automation_type, after=None, n=n, newest=False)
        )

    async def read(
        self, automation_type: str, *, after: str | None = None, n: int = 100
    ) -> list[StreamEntry]:
        return await self._db.read(
            lambda c: stream_range(c, automation_type, after=after, n=n, newest=False)
        )

    async def tail(self, automation_type: str, n: int = 20) -> list[StreamEntry]:
        return await self._db.read(
            lambda c: stream_range(c, automation_type, after=None, n=n, newest=True)
        )

    async def length(self, automation_type: str) -> int:
        return await self._db.read(lambda c: stream_len(c, automation_type))
