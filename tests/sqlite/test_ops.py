"""The SQLite backend's transaction functions and poll, on a plain connection (no event loop)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet.backends.sqlite import queue as q
from fleet.backends.sqlite.events import publish
from fleet.backends.sqlite.poller import poll
from fleet.backends.sqlite.primitives import kv_set
from fleet.backends.sqlite.schema import migrate
from fleet.core.records import FINISHED_RETENTION_SECONDS, PushRequest, TaskBody

T = "ops"


@pytest.fixture
def path(tmp_path: Path) -> Path:
    p = tmp_path / "ops.db"
    c = sqlite3.connect(p, isolation_level=None)
    c.execute("PRAGMA journal_mode = WAL")
    c.execute("BEGIN IMMEDIATE")
    migrate(c, str(p))
    c.execute("COMMIT")
    c.close()
    return p


@pytest.fixture
def conn(path: Path) -> Iterator[sqlite3.Connection]:
    c = sqlite3.connect(path, isolation_level=None)
    yield c
    c.close()


def _push(c: sqlite3.Connection, *ids: str, priority: int = 0) -> q.Pushed:
    return q.push(
        c, T, [PushRequest(TaskBody(id=i, payload=i, priority=priority)) for i in ids], 1.0
    )


def _reserve(c: sqlite3.Connection, k: int = 1, now: float = 2.0) -> q.Reserved:
    return q.reserve(c, T, k=k, visibility_seconds=10, default_max_attempts=3, now=now)


def test_push_bumps_the_signal_by_tasks_queued(conn: sqlite3.Connection) -> None:
    assert _push(conn, "a", "b").signal == 2
    again = _push(conn, "b", "c")  # b is a live duplicate
    assert [r.duplicate for r in again.results] == [True, False]
    assert (again.signal, again.ready) == (3, 1)


def test_reserve_orders_by_tier_then_fifo(conn: sqlite3.Connection) -> None:
    _push(conn, "n1", "n2")
    _push(conn, "l1", priority=-1)
    _push(conn, "h1", priority=5)
    got = _reserve(conn, k=10).reservations
    assert [r.body.id for r in got] == ["h1", "n1", "n2", "l1"]
    assert {r.body.attempt for r in got} == {1}
    assert len({r.token for r in got}) == 4


def test_release_puts_the_task_first_with_its_attempt_refunded(conn: sqlite3.Connection) -> None:
    _push(conn, "a", "b")
    first = _reserve(conn).reservations[0]
    assert q.release(conn, T, "a", first.token, 3.0)
    assert not q.release(conn, T, "a", first.token, 3.0)  # the token is spent
    again = _reserve(conn).reservations[0]
    assert (again.body.id, again.body.attempt) == ("a", 1)


def test_a_finished_task_id_can_be_pushed_again(conn: sqlite3.Connection) -> None:
    _push(conn, "a")
    r = _reserve(conn).reservations[0]
    assert q.ack(conn, T, [("a", r.token), ("a", r.token)], 3.0) == [True, False]
    assert _push(conn, "a").results[0].queued
    assert _reserve(conn).reservations[0].body.attempt == 1


def test_empty_reserve_reports_the_next_due_retry(conn: sqlite3.Connection) -> None:
    q.push(conn, T, [PushRequest(TaskBody(id="later", payload=None), delay_seconds=5)], 1.0)
    empty = _reserve(conn, now=2.0)
    assert (empty.reservations, empty.next_due) == ([], 6.0)
    assert [r.body.id for r in _reserve(conn, now=6.5).reservations] == ["later"]


def test_poll_reads_only_after_another_connection_committed(path: Path) -> None:
    watcher = sqlite3.connect(path, isolation_level=None)
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        first = poll(watcher, [T], 0, None, force=False)
        idle = poll(watcher, [T], 0, first.version, force=False)
        assert (idle.signals, idle.events) == ({}, [])  # nothing changed: nothing read
        _push(writer, "a")
        seq = publish(writer, "topic", {"x": 1}, 1.0)
        changed = poll(watcher, [T], 0, idle.version, force=False)
        assert changed.version != idle.version
        assert changed.signals == {T: 1}
        assert changed.events == [(seq, "topic", '{"x":1}')]
        forced = poll(watcher, [T], seq, changed.version, force=True)
        assert (forced.signals, forced.events) == ({T: 1}, [])
    finally:
        watcher.close()
        writer.close()


def test_acks_forget_finished_states_past_retention(conn: sqlite3.Connection) -> None:
    _push(conn, "old", "new")
    old = _reserve(conn).reservations[0]
    q.ack(conn, T, [("old", old.token)], 3.0)
    later = 3.0 + FINISHED_RETENTION_SECONDS + 1
    new = _reserve(conn, now=later).reservations[0]
    q.ack(conn, T, [("new", new.token)], later)
    assert [i for (i,) in conn.execute("SELECT id FROM tasks")] == ["new"]


def test_kv_writes_delete_expired_keys(conn: sqlite3.Connection) -> None:
    kv_set(conn, "ns", "short", "1", 1.0, now=0.0)
    kv_set(conn, "ns", "other", "2", None, now=5.0)
    assert [k for (k,) in conn.execute("SELECT key FROM kv")] == ["other"]
