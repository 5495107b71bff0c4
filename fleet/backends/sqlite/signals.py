"""A type's counters (``task_counters``: submitted, completed, failed, ...) and its
change signal (``signals``: bumped when tasks become deliverable; blocked reserves and
the poller of other processes watch it)."""

from __future__ import annotations

import sqlite3


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
