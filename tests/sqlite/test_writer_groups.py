"""The writer thread commits what was queued while it waited for the file's write lock
with the group it was waiting for (``fleet/backends/sqlite/writer.py``): under several
processes a commit carries more operations."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from fleet.backends.sqlite.writer import Writer
from fleet.core.errors import BackendUnavailable


def _connect(path: Path) -> Callable[[], sqlite3.Connection]:
    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10)
        conn.execute("PRAGMA journal_mode = WAL")
        return conn

    return connect


def _setup(path: Path) -> None:
    conn = _connect(path)()
    conn.execute("CREATE TABLE t (v TEXT)")
    conn.close()


def _insert(value: str) -> Callable[[sqlite3.Connection], None]:
    def op(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t (v) VALUES (?)", (value,))

    return op


def _seen_committed(reader: sqlite3.Connection, value: str) -> Callable[[sqlite3.Connection], int]:
    """Inserts nothing; counts the rows ``value`` another connection sees committed."""

    def op(conn: sqlite3.Connection) -> int:
        return int(reader.execute("SELECT count(*) FROM t WHERE v = ?", (value,)).fetchone()[0])

    return op


def _writer(path: Path) -> Writer:
    return Writer(_connect(path), lambda: BackendUnavailable("closed"))


def test_writes_queued_while_the_lock_was_held_commit_with_the_waiting_group(
    tmp_path: Path,
) -> None:
    path = tmp_path / "f.db"
    _setup(path)
    reader = _connect(path)()
    blocker = _connect(path)()
    blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    writer = _writer(path)
    try:
        first = writer.submit(_insert("a"))
        time.sleep(0.3)  # the writer thread now waits in BEGIN IMMEDIATE
        later = writer.submit(_seen_committed(reader, "a"))
        also = writer.submit(_insert("b"))
        time.sleep(0.1)
        assert not first.done()
        blocker.execute("COMMIT")
        first.result(timeout=10)
        also.result(timeout=10)
        # it ran in the same transaction as "a": nothing of it was committed yet
        assert later.result(timeout=10) == 0
        rows = reader.execute("SELECT v FROM t ORDER BY rowid").fetchall()
        assert [r[0] for r in rows] == ["a", "b"]
    finally:
        writer.stop()
        writer.join()
        for conn in (reader, blocker):
            conn.close()


def test_a_failing_late_write_is_rolled_back_alone(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    _setup(path)
    blocker = _connect(path)()
    blocker.execute("BEGIN IMMEDIATE")
    writer = _writer(path)

    def fail(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t (v) VALUES ('x')")
        raise ValueError("refused")

    try:
        first = writer.submit(_insert("a"))
        time.sleep(0.3)
        failing = writer.submit(fail)
        after = writer.submit(_insert("c"))
        time.sleep(0.1)
        blocker.execute("COMMIT")
        first.result(timeout=10)
        after.result(timeout=10)
        assert isinstance(failing.exception(timeout=10), ValueError)
        rows = blocker.execute("SELECT v FROM t ORDER BY rowid").fetchall()
        assert [r[0] for r in rows] == ["a", "c"]
    finally:
        writer.stop()
        writer.join()
        blocker.close()


def test_a_stop_queued_while_waiting_ends_the_loop_after_the_group(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    _setup(path)
    blocker = _connect(path)()
    blocker.execute("BEGIN IMMEDIATE")
    writer = _writer(path)
    try:
        first = writer.submit(_insert("a"))
        time.sleep(0.3)
        queued = writer.submit(_insert("b"))
        writer.stop()
        refused = writer.submit(_insert("z"))
        blocker.execute("COMMIT")
        first.result(timeout=10)
        queued.result(timeout=10)
        assert isinstance(refused.exception(timeout=1), BackendUnavailable)
        writer.join()  # the loop ended
        rows = blocker.execute("SELECT v FROM t ORDER BY rowid").fetchall()
        assert [r[0] for r in rows] == ["a", "b"]
    finally:
        blocker.close()
