"""The WAL is checkpointed by a thread of its own every few hundred changed rows
(``fleet/backends/sqlite/checkpoints.py``), not only by the commit that fills it, and
an inline write leaves the busy timeout at 0 only until the writer thread's next
transaction (``fleet/backends/sqlite/writer.py``)."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from fleet.backends.sqlite.conn import SQLiteDB, parse_url


@pytest.fixture(params=["1", "0"])
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SQLiteDB]:
    d = SQLiteDB(parse_url(f"sqlite:///{tmp_path / 'f.db'}?inline_writes={request.param}"))
    await d.open()
    try:
        yield d
    finally:
        await d.close()


def _put(key: str) -> Callable[[sqlite3.Connection], None]:
    def op(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT OR REPLACE INTO kv (ns, key, value) VALUES ('t', ?, 'v')", (key,))

    return op


async def _until(check: Callable[[], bool], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "not within the time"
        await asyncio.sleep(0.01)


async def test_commits_reach_the_database_file_before_the_log_fills(
    db: SQLiteDB, tmp_path: Path
) -> None:
    # 300 one-row writes are ~600 pages of log, short of wal_autocheckpoint's 1,000:
    # without the checkpointer none of them would be in the database file yet.
    for i in range(300):
        await db.write(_put(f"k{i}"))
    await _until(lambda: db.checkpointer is not None and db.checkpointer.runs >= 1)

    def copied_rows() -> int:
        # The database file alone, as if the log were lost: what was checkpointed.
        copy = tmp_path / "alone.db"
        shutil.copyfile(db.path, copy)
        conn = sqlite3.connect(copy)
        try:
            return int(conn.execute("SELECT COUNT(*) FROM kv WHERE ns = 't'").fetchone()[0])
        except sqlite3.DatabaseError:
            return 0  # copied while a checkpoint wrote the file: a torn copy, look again
        finally:
            conn.close()
            copy.unlink()

    await _until(lambda: copied_rows() >= 100)


async def test_close_ends_the_checkpointer_thread(tmp_path: Path) -> None:
    d = SQLiteDB(parse_url(f"sqlite:///{tmp_path / 'g.db'}"))
    await d.open()
    await d.write(_put("a"))
    assert any(t.name == "fleet-sqlite-ckpt" for t in threading.enumerate())
    await d.close()
    assert d.checkpointer is None
    assert not any(t.name == "fleet-sqlite-ckpt" for t in threading.enumerate())


async def test_the_writer_thread_waits_with_the_urls_busy_timeout_after_inline_writes(
    tmp_path: Path,
) -> None:
    d = SQLiteDB(parse_url(f"sqlite:///{tmp_path / 'h.db'}?inline_writes=1&busy_timeout_ms=4321"))
    await d.open()
    try:
        await d.write(_put("a"))  # inline: the timeout is 0 now
        # Another connection holds the lock: the write goes to the thread, which must
        # wait for it with the URL's timeout (at 0 it would fail at once).
        other = sqlite3.connect(d.path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")

        def seen_timeout(conn: sqlite3.Connection) -> int:
            return int(conn.execute("PRAGMA busy_timeout").fetchone()[0])

        threading.Timer(0.3, lambda: other.execute("COMMIT")).start()
        assert await d.write(seen_timeout) == 4321
        other.close()
    finally:
        await d.close()
