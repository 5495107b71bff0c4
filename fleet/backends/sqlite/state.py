"""Streams, primitives (KV, locks, counters), events and fleet state
(catalog, workers; configs are in ``configs.py``) of the SQLite backend.

Each function runs inside the caller's transaction and takes the current time
where expiry matters.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from fleet.core.records import StreamEntry, WorkerRecord, dumps, stream_entry_id
from fleet.core.stored import worker_record
from fleet.protocol import emit_topic

#: Events older than this are deleted by the next publish (subscribers poll
#: every few tens of milliseconds, so they have long seen them).
EVENT_RETENTION_SECONDS = 60.0


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


# ------------------------------------------------------------------ events
def publish(conn: sqlite3.Connection, topic: str, message: Any, now: float) -> int:
    """Append an event (and drop old ones); its sequence number."""
    row = conn.execute(
        "INSERT INTO events (topic, message, ts) VALUES (?, ?, ?) RETURNING seq",
        (topic, dumps(message), now),
    ).fetchone()
    conn.execute("DELETE FROM events WHERE ts < ?", (now - EVENT_RETENTION_SECONDS,))
    return int(row[0])


def last_event(conn: sqlite3.Connection) -> int:
    """The newest event's sequence number (0 if none)."""
    row = conn.execute("SELECT MAX(seq) FROM events").fetchone()
    return int(row[0]) if row[0] is not None else 0


# ------------------------------------------------------------------ kv
def kv_set(
    conn: sqlite3.Connection, ns: str, key: str, value: str, ttl: float | None, now: float
) -> None:
    _prune_kv(conn, now)
    conn.execute(
        "INSERT OR REPLACE INTO kv (ns, key, value, expires_at) VALUES (?, ?, ?, ?)",
        (ns, key, value, None if ttl is None else now + ttl),
    )


def _prune_kv(conn: sqlite3.Connection, now: float) -> None:
    # Two expired keys per write: the table sheds them as fast as writes add them.
    conn.execute(
        "DELETE FROM kv WHERE (ns, key) IN (SELECT ns, key FROM kv WHERE expires_at <= ? LIMIT 2)",
        (now,),
    )


def kv_setnx(
    conn: sqlite3.Connection, ns: str, key: str, value: str, ttl: float | None, now: float
) -> bool:
    _prune_kv(conn, now)
    changed = conn.execute(
        "INSERT INTO kv (ns, key, value, expires_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value, "
        "expires_at = excluded.expires_at WHERE kv.expires_at IS NOT NULL AND kv.expires_at <= ?",
        (ns, key, value, None if ttl is None else now + ttl, now),
    ).rowcount
    return changed == 1


def kv_get(conn: sqlite3.Connection, ns: str, key: str, now: float) -> str | None:
    row = conn.execute(
        "SELECT value FROM kv WHERE ns = ? AND key = ? AND (expires_at IS NULL OR expires_at > ?)",
        (ns, key, now),
    ).fetchone()
    return None if row is None else str(row[0])


def kv_delete(conn: sqlite3.Connection, ns: str, key: str, now: float) -> bool:
    row = conn.execute(
        "DELETE FROM kv WHERE ns = ? AND key = ? RETURNING expires_at", (ns, key)
    ).fetchone()
    return row is not None and (row[0] is None or row[0] > now)


# ------------------------------------------------------------------ locks
def lock_acquire(conn: sqlite3.Connection, name: str, token: str, hold: float, now: float) -> bool:
    changed = conn.execute(
        "INSERT INTO locks (name, token, expires_at) VALUES (?, ?, ?) "
        "ON CONFLICT (name) DO UPDATE SET token = excluded.token, "
        "expires_at = excluded.expires_at WHERE locks.expires_at <= ?",
        (name, token, now + hold, now),
    ).rowcount
    return changed == 1


def lock_renew(conn: sqlite3.Connection, name: str, token: str, hold: float, now: float) -> bool:
    return (
        conn.execute(
            "UPDATE locks SET expires_at = ? WHERE name = ? AND token = ? AND expires_at > ?",
            (now + hold, name, token, now),
        ).rowcount
        == 1
    )


def lock_release(conn: sqlite3.Connection, name: str, token: str, now: float) -> bool:
    row = conn.execute(
        "DELETE FROM locks WHERE name = ? AND token = ? RETURNING expires_at", (name, token)
    ).fetchone()
    return row is not None and row[0] > now


# ------------------------------------------------------------------ counters
def counter_incr(conn: sqlite3.Connection, name: str, n: int) -> int:
    row = conn.execute(
        "INSERT INTO counters (name, value) VALUES (?, ?) "
        "ON CONFLICT (name) DO UPDATE SET value = value + excluded.value RETURNING value",
        (name, n),
    ).fetchone()
    return int(row[0])


def counter_get(conn: sqlite3.Connection, name: str) -> int:
    row = conn.execute("SELECT value FROM counters WHERE name = ?", (name,)).fetchone()
    return int(row[0]) if row else 0


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
