"""The writer thread commits what was queued while it waited for the file's write lock
with the group it was waiting for (``fleet/backends/sqlite/writer.py``): under several
processes a commit carries more operations."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fleet.backends.sqlite.writer import Writer
from fleet.core.errors import BackendUnavailable


def _connect(path: Path) -> Callable[[], sqlite3.Connection]:
    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10)
        conn.execute("PRAGMA journal_mode = WAL")
        return conn

    return connect


def _insert(value: str) -> Callable[[sqlite3.Connection], None]:
    def op(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t (v) VALUES (?)", (value,))

    return op


@dataclass
class Held:
    """A writer whose first operation waits for the lock ``other`` holds (as another
    process would), and a reader that sees only what was committed."""

    writer: Writer
    other: sqlite3.Connection
    reader: sqlite3.Connection

    def rows(self) -> list[str]:
        return [r[0] for r in self.reader.execute("SELECT v FROM t ORDER BY rowid").fetchall()]


@pytest.fixture
def held(tmp_path: Path) -> Iterator[Held]:
    path = tmp_path / "f.db"
    connect = _connect(path)
    setup = connect()
    setup.execute("CREATE TABLE t (v TEXT)")
    setup.close()
    other, reader = connect(), connect()
    other.execute("BEGIN IMMEDIATE")
    writer = Writer(connect, lambda: BackendUnavailable("closed"))
    try:
        yield Held(writer, other, reader)
    finally:
        if other.in_transaction:
            other.execute("ROLLBACK")
        writer.stop()
        writer.join()
        other.close()
        reader.close()


def _wait_for_the_writer() -> None:
    """Time for the writer thread to take the first operation and wait in ``BEGIN``."""
    time.sleep(0.3)


def test_writes_queued_while_the_lock_was_held_commit_with_the_waiting_group(
    held: Held,
) -> None:
    first = held.writer.submit(_insert("a"))
    _wait_for_the_writer()

    def committed_a(conn: sqlite3.Connection) -> int:
        return len([v for v in held.rows() if v == "a"])

    later = held.writer.submit(committed_a)
    also = held.writer.submit(_insert("b"))
    time.sleep(0.1)
    assert not first.done()
    held.other.execute("COMMIT")
    first.result(timeout=10)
    also.result(timeout=10)
    # it ran in the same transaction as "a": nothing of it was committed yet
    assert later.result(timeout=10) == 0
    assert held.rows() == ["a", "b"]


def test_a_failing_late_write_is_rolled_back_alone(held: Held) -> None:
    def fail(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t (v) VALUES ('x')")
        raise ValueError("refused")

    first = held.writer.submit(_insert("a"))
    _wait_for_the_writer()
    failing = held.writer.submit(fail)
    after = held.writer.submit(_insert("c"))
    held.other.execute("COMMIT")
    first.result(timeout=10)
    after.result(timeout=10)
    assert isinstance(failing.exception(timeout=10), ValueError)
    assert held.rows() == ["a", "c"]


def test_a_stop_queued_while_waiting_ends_the_loop_after_the_group(held: Held) -> None:
    first = held.writer.submit(_insert("a"))
    _wait_for_the_writer()
    queued = held.writer.submit(_insert("b"))
    held.writer.stop()
    refused = held.writer.submit(_insert("z"))
    held.other.execute("COMMIT")
    first.result(timeout=10)
    queued.result(timeout=10)
    assert isinstance(refused.exception(timeout=1), BackendUnavailable)
    held.writer.join()  # the loop ended
    assert held.rows() == ["a", "b"]
