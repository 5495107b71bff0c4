"""Small pieces of the SQLite task queue shared by its transactions: the per-type
counters and change signal, the ``tier`` column, a row's body, idempotency keys
(lookup, pruning) and the live-id check (``queue.py`` re-exports them)."""

from __future__ import annotations

import json
import sqlite3

from fleet.core.records import TIERS, TaskBody

_TIER_NUM = {name: i for i, name in enumerate(TIERS)}


def tier_num(body: TaskBody) -> int:
    """The ``tasks.tier`` value of a body: 0 high, 1 normal, 2 low."""
    return _TIER_NUM[body.tier]


def merged(raw: str, attempt: int, max_attempts: int | None) -> TaskBody:
    """The task body of a row: its JSON with the ``attempt`` columns applied."""
    d = json.loads(raw)
    d["attempt"] = attempt
    d["max_attempts"] = max_attempts
    return TaskBody.from_dict(d)


def count(conn: sqlite3.Connection, automation_type: str, name: str, n: int = 1) -> None:
    """Add ``n`` to the type's counter ``name``."""
    if n:
        conn.execute(
            "INSERT INTO task_counters (type, name, value) VALUES (?, ?, ?) "
            "ON CONFLICT (type, name) DO UPDATE SET value = value + excluded.value",
            (automation_type, name, n),
        )


def signal(conn: sqlite3.Connection, automation_type: str, n: int) -> int:
    """Bump the type's change counter by ``n`` (tasks became deliverable); its new value."""
    row = conn.execute(
        "INSERT INTO signals (type, n) VALUES (?, ?) "
        "ON CONFLICT (type) DO UPDATE SET n = n + excluded.n RETURNING n",
        (automation_type, n),
    ).fetchone()
    return int(row[0])


def read_signal(conn: sqlite3.Connection, automation_type: str) -> int:
    """The type's change counter (0 if never bumped)."""
    row = conn.execute("SELECT n FROM signals WHERE type = ?", (automation_type,)).fetchone()
    return int(row[0]) if row else 0


#: Rows of expired state one sweep deletes at most (keeps its transaction short).
SWEEP_PRUNE_LIMIT = 10_000


def prune_idempotency(conn: sqlite3.Connection, now: float, limit: int) -> int:
    """Delete up to ``limit`` expired idempotency keys."""
    return conn.execute(
        "DELETE FROM idempotency WHERE (type, key) IN "
        "(SELECT type, key FROM idempotency WHERE expires_at <= ? LIMIT ?)",
        (now, limit),
    ).rowcount


def key_holder(conn: sqlite3.Connection, automation_type: str, key: str, now: float) -> str | None:
    """The task a live idempotency key names (None: none, or it expired)."""
    row = conn.execute(
        "SELECT task_id FROM idempotency WHERE type = ? AND key = ? AND expires_at > ?",
        (automation_type, key, now),
    ).fetchone()
    return None if row is None else str(row[0])


def is_live(conn: sqlite3.Connection, automation_type: str, task_id: str) -> bool:
    """A task of this id is queued, scheduled or processing in the type."""
    row = conn.execute(
        "SELECT 1 FROM tasks WHERE type = ? AND id = ? "
        "AND state IN ('queued', 'scheduled', 'processing')",
        (automation_type, task_id),
    ).fetchone()
    return row is not None
