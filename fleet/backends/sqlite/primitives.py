"""KV, locks and counters of the SQLite backend (``backend.kv``, ``backend.locks``,
``backend.counters``): the SQL of each step and the three capability objects."""

from __future__ import annotations

import sqlite3

from fleet.backends.sqlite.conn import SQLiteDB
from fleet.core.capabilities import KV, Counters, Locks
from fleet.core.records import now


# ------------------------------------------------------------------ kv
def kv_set(
    conn: sqlite3.Connection, ns: str, key: str, value: str, ttl: float | None, now: float
) -> None:
    _prune_kv(conn, now)
    conn.execute(
        "INSERT OR REPLACE INTO kv (ns, key, value, expires_at) VALUES (?, ?, ?, ?)",
        (ns, key, value, None if ttl is None else now + ttl),
    )


def _prune_kv(conn: sqlite3.Connection, now: float) -> None:
    # Two expired keys per write: the table sheds them as fast as writes add them.
    conn.execute(
        "DELETE FROM kv WHERE (ns, key) IN (SELECT ns, key FROM kv WHERE expires_at <= ? LIMIT 2)",
        (now,),
    )


def kv_setnx(
    conn: sqlite3.Connection, ns: str, key: str, value: str, ttl: float | None, now: float
) -> bool:
    _prune_kv(conn, now)
    changed = conn.execute(
        "INSERT INTO kv (ns, key, value, expires_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value, "
        "expires_at = excluded.expires_at WHERE kv.expires_at IS NOT NULL AND kv.expires_at <= ?",
        (ns, key, value, None if ttl is None else now + ttl, now),
    ).rowcount
    return changed == 1


def kv_get(conn: sqlite3.Connection, ns: str, key: str, now: float) -> str | None:
    row = conn.execute(
        "SELECT value FROM kv WHERE ns = ? AND key = ? AND (expires_at IS NULL OR expires_at > ?)",
        (ns, key, now),
    ).fetchone()
    return None if row is None else str(row[0])


def kv_delete(conn: sqlite3.Connection, ns: str, key: str, now: float) -> bool:
    row = conn.execute(
        "DELETE FROM kv WHERE ns = ? AND key = ? RETURNING expires_at", (ns, key)
    ).fetchone()
    return row is not None and (row[0] is None or row[0] > now)


# ------------------------------------------------------------------ locks
def lock_acquire(conn: sqlite3.Connection, name: str, token: str, hold: float, now: float) -> bool:
    changed = conn.execute(
        "INSERT INTO locks (name, token, expires_at) VALUES (?, ?, ?) "
        "ON CONFLICT (name) DO UPDATE SET token = excluded.token, "
        "expires_at = excluded.expires_at WHERE locks.expires_at <= ?",
        (name, token, now + hold, now),
    ).rowcount
    return changed == 1


def lock_renew(conn: sqlite3.Connection, name: str, token: str, hold: float, now: float) -> bool:
    return (
        conn.execute(
            "UPDATE locks SET expires_at = ? WHERE name = ? AND token = ? AND expires_at > ?",
            (now + hold, name, token, now),
        ).rowcount
        == 1
    )


def lock_release(conn: sqlite3.Connection, name: str, token: str, now: float) -> bool:
    row = conn.execute(
        "DELETE FROM locks WHERE name = ? AND token = ? RETURNING expires_at", (name, token)
    ).fetchone()
    return row is not None and row[0] > now


# ------------------------------------------------------------------ counters
def counter_incr(conn: sqlite3.Connection, name: str, n: int) -> int:
    row = conn.execute(
        "INSERT INTO counters (name, value) VALUES (?, ?) "
        "ON CONFLICT (name) DO UPDATE SET value = value + excluded.value RETURNING value",
        (name, n),
    ).fetchone()
    return int(row[0])


def counter_get(conn: sqlite3.Connection, name: str) -> int:
    row = conn.execute("SELECT value FROM counters WHERE name = ?", (name,)).fetchone()
    return int(row[0]) if row else 0


class SQLiteKV(KV):
    """Namespaced values with a TTL (table ``kv``)."""

    def __init__(self, db: SQLiteDB) -> None:
        self._db = db

    async def set(self, ns: str, key: str, value: str, *, ttl_seconds: float | None = None) -> None:
        await self._db.write(lambda c: kv_set(c, ns, key, value, ttl_seconds, now()))

    async def setnx(
        self, ns: str, key: str, value: str, *, ttl_seconds: float | None = None
    ) -> bool:
        return await self._db.write(lambda c: kv_setnx(c, ns, key, value, ttl_seconds, now()))

    async def get(self, ns: str, key: str) -> str | None:
        return await self._db.read(lambda c: kv_get(c, ns, key, now()))

    async def delete(self, ns: str, key: str) -> bool:
        return await self._db.write(lambda c: kv_delete(c, ns, key, now()))


class SQLiteLocks(Locks):
    """Locks (table ``locks``)."""

    def __init__(self, db: SQLiteDB) -> None:
        self._db = db

    async def acquire(self, name: str, token: str, hold_seconds: float) -> bool:
        return await self._db.write(lambda c: lock_acquire(c, name, token, hold_seconds, now()))

    async def renew(self, name: str, token: str, hold_seconds: float) -> bool:
        return await self._db.write(lambda c: lock_renew(c, name, token, hold_seconds, now()))

    async def release(self, name: str, token: str) -> bool:
        return await self._db.write(lambda c: lock_release(c, name, token, now()))


class SQLiteCounters(Counters):
    """Counters (table ``counters``)."""

    def __init__(self, db: SQLiteDB) -> None:
        self._db = db

    async def incr(self, name: str, n: int = 1) -> int:
        return await self._db.write(lambda c: counter_incr(c, name, n))

    async def get(self, name: str) -> int:
        return await self._db.read(lambda c: counter_get(c, name))

    async def set(self, name: str, value: int) -> None:
        await self._db.write(
            lambda c: c.execute(
                "INSERT OR REPLACE INTO counters (name, value) VALUES (?, ?)", (name, value)
            )
        )

    async def delete(self, name: str) -> None:
        await self._db.write(lambda c: c.execute("DELETE FROM counters WHERE name = ?", (name,)))
