"""Browse on SQLite: a page is one range of an index (schema v16): the live states
each have a partial index on ``(type, enqueued_at, id)``, the DLQ an expression index
on its body's ``enqueued_at``. The keyset condition ``(enqueued_at, id) < cursor`` is
a row value, so SQLite seeks to the cursor and reads ``limit + 1`` rows backwards: a
page costs the same at 1,000 or 1,000,000 tasks of the type (``tests/sqlite/
test_browse_plan.py`` checks the plans, ``bench/browse.py`` the times). A DLQ selection
is one write transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from fleet.backends.sqlite import queue_admin as qa
from fleet.backends.sqlite.conn import SQLiteDB
from fleet.core.capabilities.browse import (
    Browse,
    BrowseState,
    DeadSelection,
    Position,
    TaskPage,
    TaskSummary,
    check_page_args,
    decode_cursor,
    page_of,
)
from fleet.core.records import TaskBody, now
from fleet.core.stored import Unreadable, read_body

_LIVE = {
    "pending": "queued",
    "scheduled": "scheduled",
    "processing": "processing",
    "done": "done",
}

# The order key of a dead row, NULL for a body that is not JSON (json_extract would
# raise on it; such rows are left out, dead_peek shows them). The same text as the
# expression of the index dead_browse (schema v16), or SQLite would not use it.
_DEAD_AT = "(CASE WHEN json_valid(body) THEN json_extract(body, '$.enqueued_at') END)"
# A dead letter's run, the same text as in the index dead_browse_run (schema v17).
_DEAD_RUN = "(CASE WHEN json_valid(body) THEN json_extract(body, '$.run') END)"


def _keyset(column: str, pos: Position | None) -> tuple[str, tuple[Any, ...]]:
    # `column <= ?` bounds the index range (SQLite seeks to it, on a column as on an
    # expression, which a row value or an OR of two comparisons does not get); the
    # second term drops the ties the cursor already passed.
    if pos is None:
        return "", ()
    return (
        f" AND {column} <= ? AND ({column} < ? OR id < ?)",
        (pos.at, pos.at, pos.task_id),
    )


_PAUSED = "SELECT id FROM runs WHERE state = 'paused'"
_COLUMNS = "id, CAST(body AS BLOB), attempt, enqueued_at, ready_at, deadline, grp, run, finished_at"


def live_sql(
    state: BrowseState, pos: Position | None, run: str | None = None
) -> tuple[str, tuple[Any, ...]]:
    """The query of a live or done page (its parameters after type, before the
    limit). The state is written into the text, so SQLite picks that state's partial
    index (with ``run``, the run's index)."""
    order = "finished_at" if state == "done" else "enqueued_at"
    cond, args = _keyset(order, pos)
    by_run = "" if run is None else " AND run = ?"
    return (
        f"SELECT {_COLUMNS} FROM tasks WHERE type = ?{by_run} AND state = '{_LIVE[state]}'{cond} "
        f"ORDER BY {order} DESC, id DESC LIMIT ?",
        ((run,) if run is not None else ()) + args,
    )


def parked_sql(pos: Position | None, run: str) -> tuple[str, tuple[Any, ...]]:
    """The query of a page of one paused run's tasks its reserves set aside
    (``parked``: pending to everyone; parameters after type, before the limit), in the
    order of the run index."""
    cond, args = _keyset("enqueued_at", pos)
    return (
        f"SELECT {_COLUMNS} FROM tasks WHERE type = ? AND run = ? AND state = 'parked'{cond} "
        "ORDER BY enqueued_at DESC, id DESC LIMIT ?",
        (run, *args),
    )


def dead_sql(pos: Position | None, run: str | None = None) -> tuple[str, tuple[Any, ...]]:
    """The query of a DLQ page (its parameters after type, before the limit)."""
    cond, args = _keyset(_DEAD_AT, pos)
    by_run = "" if run is None else f" AND {_DEAD_RUN} = ?"
    return (
        f"SELECT id, CAST(body AS BLOB) FROM dead WHERE type = ?{by_run} AND {_DEAD_AT} "
        f"IS NOT NULL{cond} ORDER BY {_DEAD_AT} DESC, id DESC LIMIT ?",
        ((run,) if run is not None else ()) + args,
    )


def live_page(
    conn: sqlite3.Connection,
    automation_type: str,
    state: BrowseState,
    limit: int,
    pos: Position | None,
    run: str | None = None,
) -> list[TaskSummary]:
    """The ``limit + 1`` newest live (or done) tasks of ``state`` before ``pos``."""
    sql, args = live_sql(state, pos, run)
    rows = conn.execute(sql, (automation_type, *args, limit + 1)).fetchall()
    if state == "pending":
        # A paused run's parked tasks are pending too: each paused run's page (the
        # partial index of paused runs, then the run index) merged in, newest first.
        paused = [run] if run is not None else [r for (r,) in conn.execute(_PAUSED)]
        for one in paused:
            sql, args = parked_sql(pos, one)
            rows += conn.execute(sql, (automation_type, *args, limit + 1)).fetchall()
        if paused:
            rows.sort(key=lambda r: (r[3], r[0]), reverse=True)
            del rows[limit + 1 :]
    out: list[TaskSummary] = []
    for tid, raw, attempt, at, ready_at, deadline, grp, run_id, finished_at in rows:
        try:
            body = read_body(raw)
        except Unreadable:
            body = None  # the row's columns still say what the page shows
        out.append(
            TaskSummary(
                id=str(tid),
                state=state,
                priority=0 if body is None else body.priority,
                group=None if grp is None else str(grp),
                run=None if run_id is None else str(run_id),
                attempt=int(attempt),
                enqueued_at=float(at),
                ready_at=float(ready_at) if state == "scheduled" and ready_at is not None else None,
                deadline=float(deadline)
                if state == "processing" and deadline is not None
                else None,
                last_error=None if body is None else body.last_error,
                failed_at=None if body is None else body.failed_at,
                finished_at=float(finished_at)
                if state == "done" and finished_at is not None
                else None,
            )
        )
    return out


def dead_page(
    conn: sqlite3.Connection,
    automation_type: str,
    limit: int,
    pos: Position | None,
    run: str | None = None,
) -> list[TaskSummary]:
    """The ``limit + 1`` newest (by first submit) readable dead letters before ``pos``."""
    sql, args = dead_sql(pos, run)
    rows = conn.execute(sql, (automation_type, *args, limit + 1)).fetchall()
    out: list[TaskSummary] = []
    for _tid, raw in rows:
        try:
            b = read_body(raw)
        except Unreadable:
            continue
        out.append(TaskSummary.of_dead(b))
    return out


def stored_body(conn: sqlite3.Connection, automation_type: str, task_id: str) -> TaskBody | None:
    """The body of a live (not finished) or dead task of the id, if readable."""
    row = conn.execute(
        "SELECT CAST(body AS BLOB) FROM tasks WHERE type = ? AND id = ? AND state IN "
        "('queued', 'scheduled', 'processing', 'parked') UNION ALL "
        "SELECT CAST(body AS BLOB) FROM dead WHERE type = ? AND id = ? LIMIT 1",
        (automation_type, task_id, automation_type, task_id),
    ).fetchone()
    if row is None:
        return None
    try:
        return read_body(row[0])
    except Unreadable:
        return None


def dead_select(
    conn: sqlite3.Connection, automation_type: str, task_ids: Sequence[str], replay: bool
) -> tuple[DeadSelection, int]:
    """Replay or delete the named dead letters (one transaction); the selection and
    how many tasks became pending."""
    done: list[str] = []
    skipped: list[str] = []
    unknown: list[str] = []
    t = now()
    for tid in dict.fromkeys(task_ids):
        there = conn.execute(
            "SELECT 1 FROM dead WHERE type = ? AND id = ? LIMIT 1", (automation_type, tid)
        ).fetchone()
        if there is None:
            unknown.append(tid)
        elif not replay:
            conn.execute("DELETE FROM dead WHERE type = ? AND id = ?", (automation_type, tid))
            done.append(tid)
        elif qa.dead_replay(conn, automation_type, n=None, task_ids=[tid], now=t):
            done.append(tid)
        else:
            skipped.append(tid)  # a live task of the id won, or the body is unreadable
    return DeadSelection(tuple(done), tuple(skipped), tuple(unknown)), len(done) if replay else 0


class SQLiteBrowse(Browse):
    """:class:`~fleet.core.capabilities.browse.Browse` on SQLite.

    Args:
        db: The backend's database.
        wake: Called with a type and how many of its tasks became pending.
    """

    def __init__(self, db: SQLiteDB, wake: Callable[[str, int], None]) -> None:
        self._db = db
        self._wake = wake

    async def page(
        self,
        automation_type: str,
        state: BrowseState,
        limit: int,
        cursor: str | None,
        run: str | None = None,
    ) -> TaskPage:
        check_page_args(state, limit, run)
        pos = None if cursor is None else decode_cursor(cursor)
        if state == "dead":
            found = await self._db.read(lambda c: dead_page(c, automation_type, limit, pos, run))
        else:
            found = await self._db.read(
                lambda c: live_page(c, automation_type, state, limit, pos, run)
            )
        return page_of(found, limit)

    async def body(self, automation_type: str, task_id: str) -> TaskBody | None:
        return await self._db.read(lambda c: stored_body(c, automation_type, task_id))

    async def dead_select(
        self, automation_type: str, task_ids: Sequence[str], *, replay: bool
    ) -> DeadSelection:
        picked, ready = await self._db.write(
            lambda c: dead_select(c, automation_type, task_ids, replay)
        )
        if ready:
            self._wake(automation_type, ready)
        return picked
