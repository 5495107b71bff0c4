"""Queue inspection and administration of the SQLite backend: DLQ, depths,
task states, cancel and purge.

Like :mod:`fleet.backends.sqlite.queue`, each function runs inside the
caller's transaction and takes the current time.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import replace

from fleet.backends.sqlite import meters, records, runs
from fleet.backends.sqlite.group_book import Book
from fleet.backends.sqlite.queue import LIVE_STATES, run_event, tail_of
from fleet.backends.sqlite.rows import merged, tier_num
from fleet.backends.sqlite.signals import count, signal
from fleet.core.attempts import attempts_of, last_started
from fleet.core.records import (
    TIERS,
    CancelOutcome,
    QueueCounters,
    QueueDepths,
    TaskBody,
    TaskInfo,
)
from fleet.core.results import result_ttl
from fleet.core.runs import OPEN_STATES, RunCancel, RunRecord
from fleet.core.stored import Unreadable, dead_body, read_body, unreadable_body


def dead_peek(conn: sqlite3.Connection, automation_type: str, n: int) -> list[TaskBody]:
    """Up to ``n`` dead bodies, oldest death first."""
    # As bytes: an entry that is not UTF-8 is shown as unreadable like any other.
    found = conn.execute(
        "SELECT id, CAST(body AS BLOB) FROM dead WHERE type = ? ORDER BY pos LIMIT ?",
        (automation_type, n),
    ).fetchall()
    return [dead_body(str(task_id), raw) for task_id, raw in found]


def dead_replay(
    conn: sqlite3.Connection,
    automation_type: str,
    *,
    n: int | None,
    task_ids: Sequence[str] | None,
    now: float,
) -> int:
    """Move dead tasks back to the tail of their tier (or group) with ``attempt=0``
    and ``refunds=0``."""
    if task_ids is not None:
        picked: list[tuple[int, str, bytes]] = []
        for task_id in dict.fromkeys(task_ids):
            picked += conn.execute(
                "SELECT pos, id, CAST(body AS BLOB) FROM dead WHERE type = ? AND id = ? "
                "ORDER BY pos",
                (automation_type, task_id),
            ).fetchall()
        picked.sort()
    else:
        picked = conn.execute(
            "SELECT pos, id, CAST(body AS BLOB) FROM dead WHERE type = ? ORDER BY pos LIMIT ?",
            (automation_type, -1 if n is None else n),
        ).fetchall()
    replayed = 0
    book = Book(conn, automation_type, now)
    for pos, task_id, raw in picked:
        try:
            read_body(raw)
        except Unreadable:
            continue  # stays in the DLQ, shown as unreadable (dead_peek)
        conn.execute("DELETE FROM dead WHERE pos = ?", (pos,))
        live = conn.execute(
            "SELECT state FROM tasks WHERE type = ? AND id = ?", (automation_type, task_id)
        ).fetchone()
        if live is not None and live[0] in LIVE_STATES:
            # The id was resubmitted since it died; that copy supersedes this one.
            continue
        body = TaskBody.from_json(raw).evolve(attempt=0, refunds=0)
        tier = tier_num(body)
        conn.execute(
            "INSERT OR REPLACE INTO tasks (type, id, state, tier, seq, body, attempt, "
            "max_attempts, enqueued_at, grp, run) VALUES (?, ?, 'queued', ?, ?, ?, 0, ?, ?, ?, ?)",
            (
                automation_type,
                task_id,
                tier,
                tail_of(conn, automation_type, tier, body.group),
                body.to_json(),
                body.max_attempts,
                body.enqueued_at,
                body.group,
                body.run,
            ),
        )
        book.joined(body.group, tier)
        run_event(conn, body.run, automation_type, "replayed", now)
        replayed += 1
    if replayed:
        signal(conn, automation_type, replayed)
    return replayed


def dead_clear(conn: sqlite3.Connection, automation_type: str) -> int:
    """Remove every dead task of the type; how many."""
    return conn.execute("DELETE FROM dead WHERE type = ?", (automation_type,)).rowcount


def depths(conn: sqlite3.Connection, automation_type: str, now: float) -> QueueDepths:
    """Sizes of the type's queue by tier and state, and its counters."""
    tiers = dict.fromkeys(range(len(TIERS)), 0)
    oldest: float | None = None
    # Tasks without a group, then those with one: each kind walks its own index.
    for kind in ("grp IS NULL", "grp IS NOT NULL"):
        for tier, n, first in conn.execute(
            "SELECT tier, COUNT(*), MIN(enqueued_at) FROM tasks "
            f"WHERE type = ? AND state = 'queued' AND {kind} GROUP BY tier",
            (automation_type,),
        ):
            tiers[int(tier)] += int(n)
            if first is not None and (oldest is None or first < oldest):
                oldest = float(first)
    processing = conn.execute(
        "SELECT COUNT(*) FROM tasks WHERE type = ? AND state = 'processing'", (automation_type,)
    ).fetchone()[0]
    scheduled = conn.execute(
        "SELECT COUNT(*) FROM tasks WHERE type = ? AND state = 'scheduled'", (automation_type,)
    ).fetchone()[0]
    dead = conn.execute("SELECT COUNT(*) FROM dead WHERE type = ?", (automation_type,)).fetchone()[
        0
    ]
    values = dict(
        conn.execute("SELECT name, value FROM task_counters WHERE type = ?", (automation_type,))
    )
    counters = QueueCounters(
        **{name: int(values.get(name, 0)) for name in QueueCounters.__dataclass_fields__}
    )
    return QueueDepths(
        high=tiers[0],
        normal=tiers[1],
        low=tiers[2],
        processing=int(processing),
        scheduled=int(scheduled),
        dead=int(dead),
        oldest_pending_age=None if oldest is None else max(now - oldest, 0.0),
        counters=counters,
    )


def task_state(
    conn: sqlite3.Connection, automation_type: str, task_id: str, now: float
) -> TaskInfo:
    """Where one task is, with its record; three primary-key probes at most."""
    info, started_at = _bare_state(conn, automation_type, task_id, now)
    return records.with_record(conn, automation_type, info, started_at)


def _bare_state(
    conn: sqlite3.Connection, automation_type: str, task_id: str, now: float
) -> tuple[TaskInfo, float | None]:
    row = conn.execute(
        "SELECT state, body, attempt, max_attempts, deadline, ready_at, finished_at, "
        "CASE WHEN started THEN started_at END, "
        # a finished task's worker is its ack's; a running one's its reservation's mark's
        "CASE WHEN started OR state IN ('done', 'cancelled') THEN worker END "
        "FROM tasks WHERE type = ? AND id = ?",
        (automation_type, task_id),
    ).fetchone()
    if row is not None:
        state, raw, attempt, limit, deadline, ready_at, finished_at, started_at, worker = row
        if state == "parked":
            state = "queued"  # a paused run's task, set aside: still queued to the user
        forgotten = finished_at is not None and finished_at < now - result_ttl()
        if not forgotten:
            try:
                body = merged(raw, attempt, limit)
            except (KeyError, TypeError, ValueError) as exc:
                why = f"{type(exc).__name__}: {exc}"
                body = unreadable_body(task_id, raw, why).evolve(
                    attempt=attempt, max_attempts=limit
                )
            info = TaskInfo.of(
                body, state, deadline=deadline, ready_at=ready_at, finished_at=finished_at
            )
            ran = attempts_of(
                body.attempts,
                state=state,
                attempt=body.attempt,
                started_at=started_at,
                finished_at=finished_at,
                worker=worker,
            )
            return replace(info, attempts=ran), started_at
    dead = conn.execute(
        "SELECT CAST(body AS BLOB) FROM dead WHERE type = ? AND id = ? ORDER BY pos DESC LIMIT 1",
        (automation_type, task_id),
    ).fetchone()
    if dead is None:
        return TaskInfo(task_id=task_id, state="unknown"), None
    body = dead_body(task_id, dead[0])
    ran = attempts_of(
        body.attempts,
        state="dead",
        attempt=body.attempt,
        started_at=None,
        finished_at=None,
        worker=None,
    )
    return replace(TaskInfo.of(body, "dead"), attempts=ran), last_started(ran)


def cancel(
    conn: sqlite3.Connection, automation_type: str, task_id: str, now: float
) -> CancelOutcome:
    """Remove a queued/scheduled task, or flag a processing one."""
    row = conn.execute(
        "SELECT state, run FROM tasks WHERE type = ? AND id = ?", (automation_type, task_id)
    ).fetchone()
    if row is None or row[0] not in LIVE_STATES:
        return "not_found"
    if row[0] == "processing":
        conn.execute(
            "UPDATE tasks SET cancel = 1 WHERE type = ? AND id = ?", (automation_type, task_id)
        )
        return "cancelling"
    # (a body that is not JSON is kept as it is: json_remove would refuse it)
    conn.execute(
        "UPDATE tasks SET state = 'cancelled', finished_at = ?, ready_at = NULL, "
        "body = CASE WHEN json_valid(body) THEN json_remove(body, '$.payload', '$.traceback') "
        "ELSE body END WHERE type = ? AND id = ?",
        (now, automation_type, task_id),
    )
    count(conn, automation_type, "cancelled")
    run_event(conn, row[1], automation_type, "cancelled", now)
    return "cancelled"


#: Tables keyed by ``type`` whose rows purge_type deletes outright.
_PURGED = (
    "tasks", "dead", "task_counters", "idempotency", "stream", "stream_len", "catalog",
    "task_groups", "group_turn", "group_defaults", "schedules", "task_records", "domains",
    "type_pauses", "error_groups", "error_snapshots",
)  # fmt: skip


def purge_type(conn: sqlite3.Connection, automation_type: str) -> None:
    """Delete every piece of state of a type, its config generation included
    (its change counter stays, so blocked reservers never see it go backwards)."""
    for table in _PURGED:
        conn.execute(f"DELETE FROM {table} WHERE type = ?", (automation_type,))
    conn.execute("DELETE FROM config WHERE type = ?", (automation_type,))
    conn.execute("DELETE FROM workers WHERE type = ?", (automation_type,))
    conn.execute("DELETE FROM generations WHERE type = ?", (automation_type,))
    meters.purge_type(conn, automation_type)


def run_cancel(conn: sqlite3.Connection, run_id: str, now: float) -> RunCancel | None:
    """Cancel a run (see :meth:`Runs.run_cancel`): it ends ``cancelled``, then each
    of its live tasks is cancelled as :func:`cancel` does, in this transaction."""
    record = runs.get(conn, run_id, now)
    if record is None or record.state not in OPEN_STATES:
        return None if record is None else RunCancel(record)
    stopping = [
        (automation_type, task_id)
        for automation_type, task_id in runs.mark_cancelled(conn, run_id, now)
        if cancel(conn, automation_type, task_id, now) == "cancelling"
    ]
    after = runs.get(conn, run_id, now)
    return None if after is None else RunCancel(after, tuple(stopping))


def run_resume(
    conn: sqlite3.Connection, run_id: str, budget: dict[str, float] | None, now: float
) -> RunRecord | None:
    """Resume a run (see :meth:`Runs.resume`): it runs again, and each task of it a
    reserve parked is queued again at the tail of its tier (or group), in this
    transaction."""
    record, was_paused = runs.mark_running(conn, run_id, budget, now)
    if record is None or not was_paused:
        return record
    parked = conn.execute(
        "SELECT type, id, tier, grp FROM tasks WHERE run = ? AND state = 'parked' ORDER BY seq",
        (run_id,),
    ).fetchall()
    books: dict[str, Book] = {}
    back: dict[str, int] = {}
    for automation_type, task_id, tier, grp in parked:
        back[automation_type] = back.get(automation_type, 0) + 1
        conn.execute(
            "UPDATE tasks SET state = 'queued', seq = ? WHERE type = ? AND id = ?",
            (tail_of(conn, automation_type, tier, grp), automation_type, task_id),
        )
        book = books.get(automation_type)
        if book is None:
            book = books[automation_type] = Book(conn, automation_type, now)
        book.joined(grp, tier)
    for automation_type, n in back.items():
        signal(conn, automation_type, n)
    return record
