"""Writes made while the writer thread is idle run in the caller's thread
(``fleet/backends/sqlite/writer.py``), and never wait there for another process."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from fleet.backends.sqlite.conn import SQLiteDB, parse_url
from fleet.core.errors import BackendUnavailable


@pytest.fixture(params=["1", "0"])
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SQLiteDB]:
    d = SQLiteDB(parse_url(f"sqlite:///{tmp_path / 'f.db'}?inline_writes={request.param}"))
    await d.open()
    try:
        yield d
    finally:
        await d.close()


def _kv(conn: sqlite3.Connection, key: str) -> list[str]:
    return [r[0] for r in conn.execute("SELECT value FROM kv WHERE ns = 't' AND key = ?", (key,))]


def _put(key: str, value: str) -> Callable[[sqlite3.Connection], int]:
    def op(conn: sqlite3.Connection) -> int:
        conn.execute("INSERT OR REPLACE INTO kv (ns, key, value) VALUES ('t', ?, ?)", (key, value))
        return threading.get_ident()

    return op


async def test_an_idle_writer_runs_the_write_in_the_callers_thread(db: SQLiteDB) -> None:
    ran_in = await db.write(_put("a", "1"))
    inline = db.options.inline_writes
    assert (ran_in == threading.get_ident()) is inline
    assert await db.read(lambda c: _kv(c, "a")) == ["1"]


async def test_a_write_under_another_processs_lock_waits_in_the_writer_thread(
    db: SQLiteDB,
) -> None:
    # Another connection (as another process would) holds the write lock for a while:
    # the write must not block the event loop, and must land once the lock is free.
    other = sqlite3.connect(db.path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    released = threading.Event()

    def release() -> None:
        time.sleep(0.3)
        other.execute("COMMIT")
        released.set()

    threading.Thread(target=release, daemon=True).start()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    tick_task = asyncio.create_task(ticker())
    try:
        started = time.monotonic()
        ran_in = await db.write(_put("b", "2"))
        waited = time.monotonic() - started
    finally:
        tick_task.cancel()
        other.close()
    assert released.is_set() and waited >= 0.25
    assert ran_in != threading.get_ident()  # the writer thread did it
    assert ticks >= 10  # the loop kept running while the write waited
    assert await db.read(lambda c: _kv(c, "b")) == ["2"]


async def test_a_failing_write_rolls_back_and_raises(db: SQLiteDB) -> None:
    def op(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO kv (ns, key, value) VALUES ('t', 'c', '3')")
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await db.write(op)
    assert await db.read(lambda c: _kv(c, "c")) == []
    # The connection is usable afterwards, inline or not.
    await db.write(_put("c", "4"))
    assert await db.read(lambda c: _kv(c, "c")) == ["4"]


async def test_a_driver_error_is_translated(db: SQLiteDB) -> None:
    with pytest.raises(BackendUnavailable):
        await db.write(lambda c: c.execute("INSERT INTO no_such_table VALUES (1)"))
