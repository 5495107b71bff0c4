"""The task browser's pages read a range of an index on SQLite: each state's query,
first page and after a cursor, is planned as a search of its own index with no sort
step and no scan of the table (issue 41, item 4)."""

from __future__ import annotations

import sqlite3
import time

import pytest

from fleet.backends.sqlite.browse import dead_sql, live_sql
from fleet.backends.sqlite.schema import migrate
from fleet.core.capabilities.browse import Position

_INDEX = {
    "pending": "tasks_browse_queued",
    "scheduled": "tasks_browse_scheduled",
    "processing": "tasks_browse_processing",
}


@pytest.fixture
def conn() -> sqlite3.Connection:
    c = sqlite3.connect(":memory:", isolation_level=None)
    c.execute("BEGIN IMMEDIATE")
    migrate(c, ":memory:")
    c.execute("COMMIT")
    # Statistics as a big type would have them, so the plan is the one a full file gets.
    c.execute("ANALYZE")
    return c


def _plan(conn: sqlite3.Connection, sql: str, args: tuple[object, ...]) -> str:
    rows = conn.execute(f"EXPLAIN QUERY PLAN {sql}", ("t", *args, 51)).fetchall()
    return "\n".join(str(r[-1]) for r in rows)


@pytest.mark.parametrize("state", ["pending", "scheduled", "processing"])
@pytest.mark.parametrize("pos", [None, Position(1767180000.5, "abc")])
def test_live_pages_search_their_index(
    conn: sqlite3.Connection, state: str, pos: Position | None
) -> None:
    sql, args = live_sql(state, pos)  # type: ignore[arg-type]
    plan = _plan(conn, sql, args)
    assert f"SEARCH tasks USING INDEX {_INDEX[state]}" in plan, plan
    assert "TEMP B-TREE" not in plan, plan  # no sort: the index is the order
    if pos is not None:
        assert "enqueued_at<?" in plan, plan  # the cursor bounds the range searched


@pytest.mark.parametrize("pos", [None, Position(1767180000.5, "abc")])
def test_dead_pages_search_the_expression_index(
    conn: sqlite3.Connection, pos: Position | None
) -> None:
    sql, args = dead_sql(pos)
    plan = _plan(conn, sql, args)
    assert "SEARCH dead USING INDEX dead_browse" in plan, plan
    assert "TEMP B-TREE" not in plan, plan
    if pos is not None:
        assert "<expr><?" in plan, plan


def test_pages_read_the_rows_they_answer(conn: sqlite3.Connection) -> None:
    """With 5,000 queued rows of the type, a page of 10 after a cursor answers the
    rows before it, many times faster than the same query without the index."""
    conn.executemany(
        "INSERT INTO tasks (type, id, state, tier, body, enqueued_at) VALUES (?, ?, ?, 1, ?, ?)",
        [("t", f"id{i:05d}", "queued", '{"id": "x"}', 1000.0 + i) for i in range(5000)],
    )
    sql, args = live_sql("pending", Position(3000.0, "id02000"))
    rows = conn.execute(sql, ("t", *args, 11)).fetchall()
    assert [r[0] for r in rows][:2] == ["id01999", "id01998"]
    # The full scan would visit 5,000 rows; time both as a coarse check of the seek.
    t0 = time.perf_counter()
    for _ in range(200):
        conn.execute(sql, ("t", *args, 11)).fetchall()
    seek = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(20):
        conn.execute(
            "SELECT id FROM tasks NOT INDEXED WHERE type = ? AND state = 'queued' "
            "AND enqueued_at <= ? AND (enqueued_at < ? OR id < ?) "
            "ORDER BY enqueued_at DESC, id DESC LIMIT 11",
            ("t", *args),
        ).fetchall()
    scan = (time.perf_counter() - t0) * 10
    assert seek < scan / 5, (seek, scan)


@pytest.mark.parametrize("pos", [None, Position(1767180000.5, "abc")])
def test_done_pages_search_the_done_index(conn: sqlite3.Connection, pos: Position | None) -> None:
    sql, args = live_sql("done", pos)
    plan = _plan(conn, sql, args)
    assert "SEARCH tasks USING INDEX tasks_browse_done" in plan, plan
    assert "TEMP B-TREE" not in plan, plan
    if pos is not None:
        assert "finished_at<?" in plan, plan


@pytest.mark.parametrize("state", ["pending", "scheduled", "processing", "done"])
@pytest.mark.parametrize("pos", [None, Position(1767180000.5, "abc")])
def test_run_filtered_pages_search_a_run_index(
    conn: sqlite3.Connection, state: str, pos: Position | None
) -> None:
    sql, args = live_sql(state, pos, run="r1")  # type: ignore[arg-type]
    plan = _plan(conn, sql, args)
    index = "tasks_browse_done_run" if state == "done" else "tasks_browse_run"
    assert f"SEARCH tasks USING INDEX {index} (type=? AND run=?" in plan, plan
    assert "TEMP B-TREE" not in plan, plan
    dead, dead_args = dead_sql(pos, run="r1")
    plan = _plan(conn, dead, dead_args)
    assert "SEARCH dead USING INDEX dead_browse_run (type=? AND <expr>=?" in plan, plan
    assert "TEMP B-TREE" not in plan, plan
