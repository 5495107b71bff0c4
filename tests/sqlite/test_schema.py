"""Schema versions, migrations, URLs and query plans of the SQLite backend."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet.backends import open_backend
from fleet.backends.sqlite.conn import parse_url
from fleet.backends.sqlite.group_book import _HELD, _READY
from fleet.backends.sqlite.schema import SCHEMA_VERSION, migrate, read_version, split_statements
from fleet.core.capabilities.proxies import ProxyPolicy
from fleet.core.errors import BackendUnavailable, ConfigError, SchemaVersionError
from fleet.core.flow import GroupLimits
from fleet.core.records import PushRequest, TaskBody
from tests.sqlite.helpers import TYPE, url_for


def _connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    c = _connect(tmp_path / "plain.db")
    c.execute("BEGIN IMMEDIATE")
    migrate(c, "plain.db")
    yield c
    c.execute("COMMIT")
    c.close()


def _indexes(c: sqlite3.Connection) -> set[str]:
    return {n for (n,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}


async def test_older_file_is_migrated_keeping_its_tasks(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    c = _connect(path)
    c.execute("BEGIN IMMEDIATE")
    assert migrate(c, str(path), target=1) == 0
    # A row as version 1 wrote it (today's push writes columns added since).
    body = TaskBody(id="old", payload={"v": 1}, enqueued_at=1.0)
    c.execute(
        "INSERT INTO tasks (type, id, state, tier, seq, body, enqueued_at) "
        "VALUES (?, 'old', 'queued', 1, 1, ?, 1.0)",
        (TYPE, body.to_json()),
    )
    c.execute("COMMIT")
    assert read_version(c) == 1
    assert "tasks_finished" not in _indexes(c)
    c.close()

    backend = await open_backend(url_for(path))
    try:
        got = await backend.queues.reserve(TYPE)
        assert [(r.body.id, r.body.payload) for r in got] == [("old", {"v": 1})]
    finally:
        await backend.close()
    c = _connect(path)
    assert read_version(c) == SCHEMA_VERSION == 25
    assert {"tasks_finished", "idempotency_expiry", "events_ts"} <= _indexes(c)
    assert {"tasks_grouped", "task_groups_ready", "task_groups_due"} <= _indexes(c)
    assert {"started", "grp"} <= {row[1] for row in c.execute("PRAGMA table_info(tasks)")}
    assert {"limit_holders_until", "limiters_forget", "schedules_due"} <= _indexes(c)
    assert {"proxies_forget", "proxy_places_until", "proxy_sticky_expiry"} <= _indexes(c)
    assert {"error_groups_recent", "error_snapshots_age"} <= _indexes(c)
    c.close()


async def test_a_version_3_file_gains_the_limiter_tables(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    c = _connect(path)
    c.execute("BEGIN IMMEDIATE")
    migrate(c, str(path), target=3)
    c.execute("COMMIT")
    c.close()
    backend = await open_backend(url_for(path))
    try:
        assert (
            await backend.limits.acquire("k", "t", interval=1.0, concurrency=1, hold_seconds=5)
            == 0.0
        )
        assert (
            await backend.limits.acquire("k", "u", interval=1.0, concurrency=1, hold_seconds=5) > 0
        )
    finally:
        await backend.close()
    c = _connect(path)
    assert read_version(c) == SCHEMA_VERSION
    tables = {n for (n,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"limit_holders", "limiters"} <= tables
    c.close()


async def test_a_version_6_file_gains_the_proxy_tables(tmp_path: Path) -> None:
    path = tmp_path / "v6.db"
    c = _connect(path)
    c.execute("BEGIN IMMEDIATE")
    migrate(c, str(path), target=6)
    c.execute("COMMIT")
    c.close()
    backend = await open_backend(url_for(path))
    try:
        assert (
            await backend.proxies.take(["http://p:1"], "t", max_concurrency=1)
        ).key == "http://p:1"
        assert (await backend.proxies.take(["http://p:1"], "u", max_concurrency=1)).key is None
    finally:
        await backend.close()
    c = _connect(path)
    assert read_version(c) == SCHEMA_VERSION
    tables = {n for (n,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"proxies", "proxy_places", "proxy_sticky"} <= tables
    c.close()


async def test_a_version_9_file_keeps_its_group_limits_and_gains_a_proxy_policy(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v9.db"
    c = _connect(path)
    c.execute("BEGIN IMMEDIATE")
    migrate(c, str(path), target=9)
    # The row as version 9 wrote it: group limits only.
    c.execute(
        "INSERT INTO group_defaults (type, concurrency, interval, rate, gen) "
        "VALUES (?, 3, 6.0, '10/m', 4)",
        (TYPE,),
    )
    c.execute("COMMIT")
    c.close()
    backend = await open_backend(url_for(path))
    try:
        assert await backend.groups.defaults(TYPE) == (GroupLimits.of(3, "10/m"), 4)
        assert await backend.proxies.policy(TYPE) == (None, 4)  # none stored yet
        policy = ProxyPolicy(bad_threshold=2, cooldown_seconds=30.0, max_concurrency=5)
        assert await backend.groups.set_defaults(TYPE, GroupLimits(), gen=5, proxy=policy)
        assert await backend.proxies.policy(TYPE) == (policy, 5)
    finally:
        await backend.close()
    c = _connect(path)
    assert read_version(c) == SCHEMA_VERSION
    columns = {row[1] for row in c.execute("PRAGMA table_info(group_defaults)")}
    assert {"proxy_threshold", "proxy_cooldown", "proxy_cap"} <= columns
    c.close()


async def test_newer_file_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    await (await open_backend(url_for(path))).close()  # creates the current schema
    c = _connect(path)
    c.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    c.close()
    with pytest.raises(SchemaVersionError, match=r"schema version 99.*up to version 25.*upgrade"):
        await open_backend(url_for(path))


def test_split_statements_keeps_triggers_whole() -> None:
    sql = "CREATE TABLE a (x);\nCREATE TRIGGER t AFTER DELETE ON a BEGIN DELETE FROM a; END;\n"
    assert split_statements(sql) == [
        "CREATE TABLE a (x);",
        "CREATE TRIGGER t AFTER DELETE ON a BEGIN DELETE FROM a; END;",
    ]


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///./fleet.db", "fleet.db"),
        ("sqlite:///relative/dir/f.db", "relative/dir/f.db"),
        ("sqlite:////abs/dir/f.db", "/abs/dir/f.db"),
    ],
)
def test_url_forms(url: str, path: str) -> None:
    assert str(parse_url(url).path) == path


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///:memory:",
        "sqlite://",
        "sqlite://host/f.db",
        "sqlite:///f.db?bogus=1",
        "sqlite:///f.db?poll_ms=0",
        "sqlite:///f.db?inline_writes=yes",
    ],
)
def test_bad_urls_are_refused(url: str) -> None:
    with pytest.raises(ConfigError):
        parse_url(url)


async def test_unusable_files_raise_backend_unavailable(tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()
    (tmp_path / "junk.db").write_bytes(b"this is not a database file at all" * 100)
    for name in ("dir.db", "junk.db"):
        with pytest.raises(BackendUnavailable, match=name):
            await open_backend(url_for(tmp_path / name))


async def test_parent_directories_are_created(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "fleet.db"
    backend = await open_backend(url_for(path))
    await backend.close()
    assert path.exists()


def _plan(c: sqlite3.Connection, sql: str, params: tuple[object, ...]) -> str:
    return " | ".join(row[3] for row in c.execute("EXPLAIN QUERY PLAN " + sql, params))


@pytest.mark.parametrize(
    ("sql", "params", "index"),
    [
        (
            "UPDATE tasks SET state = 'processing' WHERE rowid IN (SELECT rowid FROM tasks "
            "WHERE type = ? AND state = 'queued' AND grp IS NULL ORDER BY tier, seq LIMIT ?)",
            (TYPE, 10),
            "tasks_queued",
        ),
        (
            "SELECT MAX(seq) FROM tasks WHERE type = ? AND state = 'queued' AND grp IS NULL "
            "AND tier = ?",
            (TYPE, 1),
            "tasks_queued",
        ),
        (
            "SELECT MIN(seq) FROM tasks WHERE type = ? AND state = 'queued' AND grp = ? "
            "AND tier = ?",
            (TYPE, "g", 1),
            "tasks_grouped",
        ),
        (
            "SELECT id, tier FROM tasks WHERE type = ? AND grp = ? AND state = 'queued' "
            "ORDER BY tier, seq LIMIT 1",
            (TYPE, "g"),
            "tasks_grouped",
        ),
        (
            f"SELECT name FROM {_READY} AND key_tier = ? ORDER BY turn LIMIT 1",
            (TYPE, 1),
            "task_groups_ready",
        ),
        (f"SELECT MAX(turn) FROM {_READY} AND key_tier = ?", (TYPE, 1), "task_groups_ready"),
        (f"SELECT 1 FROM {_READY} LIMIT 1", (TYPE,), "task_groups_ready"),
        (f"SELECT name FROM {_HELD} AND due <= ? ORDER BY due", (TYPE, 1.0), "task_groups_due"),
        (
            f"SELECT due FROM {_HELD} AND name != ? ORDER BY due LIMIT 1",
            (TYPE, "g"),
            "task_groups_due",
        ),
        (
            "DELETE FROM tasks WHERE rowid IN (SELECT rowid FROM tasks "
            "WHERE state IN ('done', 'cancelled') AND finished_at < ? LIMIT ?)",
            (1.0, 10),
            "tasks_finished",
        ),
        (
            "DELETE FROM idempotency WHERE (type, key) IN "
            "(SELECT type, key FROM idempotency WHERE expires_at <= ? LIMIT ?)",
            (1.0, 10),
            "idempotency_expiry",
        ),
        (
            "DELETE FROM kv WHERE (ns, key) IN "
            "(SELECT ns, key FROM kv WHERE expires_at <= ? LIMIT 2)",
            (1.0,),
            "kv_expiry",
        ),
        ("DELETE FROM pool_items WHERE name = ? AND xs <= ?", ("p", 1.0), "pool_items_xs"),
        ("DELETE FROM events WHERE ts < ?", (1.0,), "events_ts"),
        (
            "DELETE FROM proxy_places WHERE (key, token) IN "
            "(SELECT key, token FROM proxy_places WHERE until <= ? LIMIT 2)",
            (1.0,),
            "proxy_places_until",
        ),
        (
            "DELETE FROM proxies WHERE key IN "
            "(SELECT key FROM proxies WHERE forget_at <= ? LIMIT 2)",
            (1.0,),
            "proxies_forget",
        ),
        (
            "DELETE FROM proxy_sticky WHERE name IN "
            "(SELECT name FROM proxy_sticky WHERE expires_at <= ? LIMIT 2)",
            (1.0,),
            "proxy_sticky_expiry",
        ),
    ],
)
def test_hot_queries_use_an_index(
    conn: sqlite3.Connection, sql: str, params: tuple[object, ...], index: str
) -> None:
    plan = _plan(conn, sql, params)
    assert index in plan, plan
    assert "TEMP B-TREE" not in plan, plan


def test_pool_claim_walks_the_tag_index_in_order(conn: sqlite3.Connection) -> None:
    from fleet.backends.sqlite.pools import _matching

    sql, params = _matching("p", {"region": "eu", "kind": "cookie"}, 1.0)
    plan = _plan(conn, sql + " ORDER BY t.xs DESC LIMIT 1", tuple(params))
    assert "pool_tags_xs" in plan, plan
    assert "TEMP B-TREE" not in plan, plan


async def test_a_version_14_run_keeps_its_keys_in_each_of_its_types(tmp_path: Path) -> None:
    """Version 15 keys ``run_keys`` by (run, type): a key of a live run is kept for
    every type the run counted, and the run gains its idle expiry and max delay."""
    path = tmp_path / "v14.db"
    c = _connect(path)
    c.execute("BEGIN IMMEDIATE")
    migrate(c, str(path), target=14)
    run = "0" * 32
    c.execute(
        "INSERT INTO runs (id, seq, state, created_at, counters) VALUES (?, 1, 'running', 1.0, ?)",
        (run, '{"*": {"submitted": 2, "pending": 2}, "a": {"submitted": 1}, "b": {"pending": 1}}'),
    )
    c.execute("INSERT INTO run_keys (run, key) VALUES (?, 'https://x/1')", (run,))
    c.execute("COMMIT")
    c.close()
    backend = await open_backend(url_for(path))
    try:
        record = await backend.runs.get(run)
        assert record is not None and record.max_delay_seconds == 86_400
        for automation_type in ("a", "b"):
            body = TaskBody(id=f"t-{automation_type}", payload={}, run=run)
            pushed = await backend.queues.push(
                automation_type, [PushRequest(body, unique_key="https://x/1")]
            )
            assert pushed[0].duplicate
        fresh = TaskBody(id="t-c", payload={}, run=run)
        assert (await backend.queues.push("c", [PushRequest(fresh, unique_key="https://x/1")]))[
            0
        ].queued
    finally:
        await backend.close()
