"""Task records of the SQLite backend: progress and outputs beside a task's state.

``task_records`` holds a row only for tasks that reported progress or emitted;
each write is one upsert inside the caller's transaction (the stream push's, so
an output and its place in the record land together). Rows go with their task's
finished state (:func:`prune`), or ``FLEET_RESULT_TTL_SECONDS`` after their last
write.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from fleet.core.records import TaskInfo, dumps
from fleet.core.results import (
    RECORD_MAX_OUTPUTS,
    result_max_per_type,
    result_ttl,
    stored_output,
)


def add_output(
    conn: sqlite3.Connection, automation_type: str, task_id: str, output: dict[str, Any], now: float
) -> None:
    """Append one output to the task's record, keeping the newest
    :data:`RECORD_MAX_OUTPUTS`."""
    row = conn.execute(
        "SELECT outputs FROM task_records WHERE type = ? AND id = ?", (automation_type, task_id)
    ).fetchone()
    outputs: list[Any] = []
    if row is not None:
        try:
            outputs = json.loads(row[0])
        except ValueError:
            outputs = []
    outputs.append(output)
    del outputs[:-RECORD_MAX_OUTPUTS]
    conn.execute(
        "INSERT INTO task_records (type, id, outputs, total, updated_at) VALUES (?, ?, ?, 1, ?) "
        "ON CONFLICT (type, id) DO UPDATE SET outputs = excluded.outputs, "
        "total = total + 1, updated_at = excluded.updated_at",
        (automation_type, task_id, dumps(outputs), now),
    )


def set_progress(
    conn: sqlite3.Connection,
    automation_type: str,
    task_id: str,
    progress: dict[str, Any],
    now: float,
) -> None:
    """Keep the task's latest progress report."""
    conn.execute(
        "INSERT INTO task_records (type, id, progress, updated_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (type, id) DO UPDATE SET progress = excluded.progress, "
        "updated_at = excluded.updated_at",
        (automation_type, task_id, dumps(progress), now),
    )


def with_record(
    conn: sqlite3.Connection, automation_type: str, info: TaskInfo, started_at: float | None
) -> TaskInfo:
    """``info`` with the task's started time, progress and outputs."""
    if info.state == "unknown":
        return info
    row = conn.execute(
        "SELECT progress, outputs, total FROM task_records WHERE type = ? AND id = ?",
        (automation_type, info.task_id),
    ).fetchone()
    if row is None:
        return info.with_extras(started_at=started_at)
    try:
        progress = json.loads(row[0]) if row[0] else None
        outputs = json.loads(row[1])
    except ValueError:
        progress, outputs = None, []
    return info.with_extras(
        started_at=started_at,
        progress=progress if isinstance(progress, dict) else None,
        outputs=tuple(o for o in map(stored_output, outputs) if o is not None),
        outputs_total=int(row[2]),
    )


def forget(conn: sqlite3.Connection, automation_type: str, task_ids: list[str]) -> None:
    """Drop the records of these tasks (their state was pruned or replaced)."""
    conn.executemany(
        "DELETE FROM task_records WHERE type = ? AND id = ?",
        [(automation_type, tid) for tid in task_ids],
    )


def prune_finished(conn: sqlite3.Connection, now: float, limit: int) -> int:
    """Forget up to ``limit`` done/cancelled states older than their retention
    (``FLEET_RESULT_TTL_SECONDS``).

    Acks call this with a small multiple of the tasks they finish, so the table
    sheds old states as fast as it gains new ones, with or without a sweeper.
    """
    return conn.execute(
        "DELETE FROM tasks WHERE rowid IN (SELECT rowid FROM tasks "
        "WHERE state IN ('done', 'cancelled') AND finished_at < ? LIMIT ?)",
        (now - result_ttl(), limit),
    ).rowcount


def prune(conn: sqlite3.Connection, automation_type: str, now: float, limit: int) -> int:
    """The sweep's share: forget finished states past their retention, bound the
    type's to ``FLEET_RESULT_MAX_PER_TYPE`` (oldest finished first), and drop
    records not written for ``FLEET_RESULT_TTL_SECONDS`` whose task is no longer
    live. Deletes ``limit`` rows of each kind at most; returns how many it deleted."""
    ttl, keep = result_ttl(), result_max_per_type()
    pruned = prune_finished(conn, now, limit)
    (finished,) = conn.execute(
        "SELECT COUNT(*) FROM tasks WHERE type = ? AND state IN ('done', 'cancelled')",
        (automation_type,),
    ).fetchone()
    gone: list[str] = []
    if finished > keep:
        gone = [
            r[0]
            for r in conn.execute(
                "DELETE FROM tasks WHERE rowid IN (SELECT rowid FROM tasks "
                "WHERE type = ? AND state IN ('done', 'cancelled') ORDER BY finished_at LIMIT ?) "
                "RETURNING id",
                (automation_type, min(finished - keep, limit)),
            ).fetchall()
        ]
        forget(conn, automation_type, gone)
    stale = conn.execute(
        "DELETE FROM task_records WHERE rowid IN (SELECT r.rowid FROM task_records r "
        "WHERE r.updated_at < ? AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.type = r.type "
        "AND t.id = r.id AND t.state IN ('queued', 'scheduled', 'processing', 'parked')) "
        "LIMIT ?)",
        (now - ttl, limit),
    ).rowcount
    return pruned + len(gone) + stale
