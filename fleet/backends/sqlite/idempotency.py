"""Idempotency keys of pushes (``idempotency``): who holds a key, and the pruning
of expired ones."""

from __future__ import annotations

import sqlite3

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
