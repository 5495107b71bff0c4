"""Pools of the SQLite backend: items, the tag index, claims.

``pool_items`` holds each item with ``xs`` (its place in the pool's order:
:func:`fleet.core.capabilities.pools.place_of`) and ``rnd`` (a random sort key for the
``random`` strategy). ``pool_tags`` has one row per (item, tag) with copies of
``xs``/``rnd``, indexed by ``(name, k, v, xs)`` and ``(name, k, v, rnd)``: a
claim with ``where`` walks the index of one tag in strategy order and stops at
the first unclaimed match, so its cost does not grow with the pool.
"""

from __future__ import annotations

import json
import random
import sqlite3
from typing import Any

from fleet.backends.sqlite.conn import SQLiteDB
from fleet.core.capabilities import Pools
from fleet.core.capabilities.pools import place_of, tag_text
from fleet.core.records import (
    PoolClaim,
    PoolItem,
    PoolStats,
    PoolStrategy,
    dumps,
    new_id,
    new_token,
    now,
)

#: ``expiring_soon`` counts items whose expiry is within this many seconds.
EXPIRING_SOON_SECONDS = 60.0

_ITEM_COLUMNS = "i.id, i.payload, i.tags, i.expires_at, i.created_at"


def _item(row: tuple[str, str, str, float | None, float]) -> PoolItem:
    return PoolItem(
        id=row[0],
        payload=json.loads(row[1]),
        tags=json.loads(row[2]),
        expires_at=row[3],
        created_at=row[4],
    )


def _matching(name: str, where: dict[str, Any] | None, now: float) -> tuple[str, list[Any]]:
    """SQL (without ORDER BY) selecting unclaimed, unexpired items matching ``where``.

    With ``where`` the rows come from the tag index of its first field, so an
    ``ORDER BY t.xs``/``t.rnd`` walks that index.
    """
    fields = sorted((where or {}).items())
    unclaimed = "(i.claim_until IS NULL OR i.claim_until <= ?)"
    if not fields:
        sql = (
            f"SELECT {_ITEM_COLUMNS} FROM pool_items i WHERE i.name = ? AND i.xs > ? "
            f"AND {unclaimed}"
        )
        params: list[Any] = [name, now, now]
        return sql, params
    (k0, v0), rest = fields[0], fields[1:]
    sql = (
        f"SELECT {_ITEM_COLUMNS} FROM pool_tags t "
        "JOIN pool_items i ON i.name = t.name AND i.id = t.item_id "
        f"WHERE t.name = ? AND t.k = ? AND t.v = ? AND t.xs > ? AND {unclaimed}"
    )
    params = [name, k0, tag_text(v0), now, now]
    for k, v in rest:
        sql += (
            " AND EXISTS (SELECT 1 FROM pool_tags o WHERE o.name = t.name "
            "AND o.item_id = t.item_id AND o.k = ? AND o.v = ?)"
        )
        params += [k, tag_text(v)]
    return sql, params


def _order(where: dict[str, Any] | None, desc: bool) -> str:
    """The pool's order (place, then id), from the greatest with ``desc``."""
    t, item = ("t", "t.item_id") if where else ("i", "i.id")
    way = " DESC" if desc else ""
    return f" ORDER BY {t}.xs{way}, {item}{way}"


def prune(conn: sqlite3.Connection, name: str, now: float) -> int:
    """Delete the pool's expired items (their tags go with them); how many."""
    return conn.execute("DELETE FROM pool_items WHERE name = ? AND xs <= ?", (name, now)).rowcount


def put(
    conn: sqlite3.Connection,
    name: str,
    payload: Any,
    tags: dict[str, Any],
    *,
    ttl_seconds: float | None,
    item_id: str | None,
    now: float,
) -> str:
    """Insert or replace an item, keeping an existing claim (see :meth:`Pools.put`)."""
    prune(conn, name, now)
    item_id = item_id or new_id()
    old = conn.execute(
        "SELECT claim_token, claim_until FROM pool_items WHERE name = ? AND id = ?",
        (name, item_id),
    ).fetchone()
    token, until = old if old is not None else (None, None)
    created = now  # a put makes the item anew (only a claim on it is kept)
    expires = None if ttl_seconds is None else now + ttl_seconds
    xs = place_of(expires, created)
    rnd = random.random()
    conn.execute("DELETE FROM pool_items WHERE name = ? AND id = ?", (name, item_id))
    conn.execute(
        "INSERT INTO pool_items (name, id, payload, tags, expires_at, xs, rnd, created_at, "
        "claim_token, claim_until) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (name, item_id, dumps(payload), dumps(tags), expires, xs, rnd, created, token, until),
    )
    conn.executemany(
        "INSERT INTO pool_tags (name, item_id, k, v, xs, rnd) VALUES (?, ?, ?, ?, ?, ?)",
        [(name, item_id, k, tag_text(v), xs, rnd) for k, v in tags.items()],
    )
    return item_id


def _first(
    conn: sqlite3.Connection,
    name: str,
    where: dict[str, Any] | None,
    strategy: PoolStrategy,
    now: float,
) -> PoolItem | None:
    sql, params = _matching(name, where, now)
    if strategy == "random":
        prefix = "t" if where else "i"
        pivot = random.random()
        for cond, arg in ((f" AND {prefix}.rnd >= ?", pivot), (f" AND {prefix}.rnd < ?", pivot)):
            order = f" ORDER BY {prefix}.rnd"
            row = conn.execute(sql + cond + order + " LIMIT 1", (*params, arg)).fetchone()
            if row is not None:
                return _item(row)
        return None
    order = _order(where, desc=strategy == "freshest")
    row = conn.execute(sql + order + " LIMIT 1", params).fetchone()
    return None if row is None else _item(row)


def claim(
    conn: sqlite3.Connection,
    name: str,
    *,
    where: dict[str, Any] | None,
    hold_seconds: float,
    strategy: PoolStrategy,
    now: float,
) -> PoolClaim | None:
    """Claim one matching item (see :meth:`Pools.claim`)."""
    item = _first(conn, name, where, strategy, now)
    if item is None:
        return None
    token = new_token()
    until = now + hold_seconds
    conn.execute(
        "UPDATE pool_items SET claim_token = ?, claim_until = ? WHERE name = ? AND id = ?",
        (token, until, name, item.id),
    )
    return PoolClaim(item=item, token=token, lease_until=until)


def release(conn: sqlite3.Connection, name: str, item_id: str, token: str, now: float) -> bool:
    """End a held claim early."""
    return (
        conn.execute(
            "UPDATE pool_items SET claim_token = NULL, claim_until = NULL "
            "WHERE name = ? AND id = ? AND claim_token = ? AND claim_until > ?",
            (name, item_id, token, now),
        ).rowcount
        == 1
    )


def evict(conn: sqlite3.Connection, name: str, item_id: str, token: str, now: float) -> bool:
    """Remove a claimed item for good if the claim is still held."""
    return (
        conn.execute(
            "DELETE FROM pool_items WHERE name = ? AND id = ? AND claim_token = ? "
            "AND claim_until > ?",
            (name, item_id, token, now),
        ).rowcount
        == 1
    )


def extend(
    conn: sqlite3.Connection, name: str, item_id: str, token: str, hold: float, now: float
) -> bool:
    """Move a held claim's end to now + ``hold``."""
    return (
        conn.execute(
            "UPDATE pool_items SET claim_until = ? WHERE name = ? AND id = ? AND claim_token = ? "
            "AND claim_until > ?",
            (now + hold, name, item_id, token, now),
        ).rowcount
        == 1
    )


def list_items(
    conn: sqlite3.Connection, name: str, where: dict[str, Any] | None, n: int, now: float
) -> list[PoolItem]:
    """Up to ``n`` unclaimed, unexpired matching items, freshest first."""
    sql, params = _matching(name, where, now)
    found = conn.execute(sql + _order(where, desc=True) + " LIMIT ?", (*params, n)).fetchall()
    return [_item(row) for row in found]


def size(conn: sqlite3.Connection, name: str, where: dict[str, Any] | None, now: float) -> int:
    """How many unclaimed, unexpired items match."""
    sql, params = _matching(name, where, now)
    row = conn.execute(f"SELECT COUNT(*) FROM ({sql})", params).fetchone()
    return int(row[0])


def remove(conn: sqlite3.Connection, name: str, item_id: str, now: float) -> bool:
    """Remove an item whatever its claim; False for one that expired (it is gone)."""
    prune(conn, name, now)
    return (
        conn.execute("DELETE FROM pool_items WHERE name = ? AND id = ?", (name, item_id)).rowcount
        == 1
    )


def prune_all(conn: sqlite3.Connection, name: str, now: float) -> int:
    """Remove expired items and forget lapsed claims; how many items went."""
    removed = prune(conn, name, now)
    conn.execute(
        "UPDATE pool_items SET claim_token = NULL, claim_until = NULL "
        "WHERE name = ? AND claim_until <= ?",
        (name, now),
    )
    return removed


def names(conn: sqlite3.Connection) -> list[str]:
    """Pools holding at least one item, sorted."""
    return [str(n) for (n,) in conn.execute("SELECT DISTINCT name FROM pool_items ORDER BY name")]


def stats(conn: sqlite3.Connection, name: str, now: float) -> PoolStats:
    """Counts of one pool (unexpired items only)."""
    row = conn.execute(
        "SELECT COUNT(*), "
        "COALESCE(SUM(claim_until > ?), 0), "
        "COALESCE(SUM(expires_at IS NOT NULL AND expires_at <= ?), 0) "
        "FROM pool_items WHERE name = ? AND xs > ?",
        (now, now + EXPIRING_SOON_SECONDS, name, now),
    ).fetchone()
    total, claimed, soon = (int(v) for v in row)
    return PoolStats(
        name=name, total=total, available=total - claimed, claimed=claimed, expiring_soon=soon
    )


def drop(conn: sqlite3.Connection, name: str) -> int:
    """Delete a pool; how many items it had."""
    return conn.execute("DELETE FROM pool_items WHERE name = ?", (name,)).rowcount


class SQLitePools(Pools):
    """Pools of one database file (table ``pool_items``), one transaction per call."""

    def __init__(self, db: SQLiteDB) -> None:
        self._db = db

    async def put(
        self,
        name: str,
        payload: Any,
        tags: dict[str, Any],
        *,
        ttl_seconds: float | None = None,
        item_id: str | None = None,
    ) -> str:
        return await self._db.write(
            lambda c: put(
                c, name, payload, tags, ttl_seconds=ttl_seconds, item_id=item_id, now=now()
            )
        )

    async def claim(
        self,
        name: str,
        *,
        where: dict[str, Any] | None = None,
        hold_seconds: float = 60.0,
        strategy: PoolStrategy = "freshest",
    ) -> PoolClaim | None:
        return await self._db.write(
            lambda c: claim(
                c, name, where=where, hold_seconds=hold_seconds, strategy=strategy, now=now()
            )
        )

    async def release(self, name: str, item_id: str, token: str) -> bool:
        return await self._db.write(lambda c: release(c, name, item_id, token, now()))

    async def evict(self, name: str, item_id: str, token: str) -> bool:
        return await self._db.write(lambda c: evict(c, name, item_id, token, now()))

    async def extend(self, name: str, item_id: str, token: str, hold_seconds: float) -> bool:
        return await self._db.write(lambda c: extend(c, name, item_id, token, hold_seconds, now()))

    async def items(
        self, name: str, *, where: dict[str, Any] | None = None, n: int = 50
    ) -> list[PoolItem]:
        return await self._db.read(lambda c: list_items(c, name, where, n, now()))

    async def size(self, name: str, *, where: dict[str, Any] | None = None) -> int:
        return await self._db.read(lambda c: size(c, name, where, now()))

    async def remove(self, name: str, item_id: str) -> bool:
        return await self._db.write(lambda c: remove(c, name, item_id, now()))

    async def prune(self, name: str) -> int:
        return await self._db.write(lambda c: prune_all(c, name, now()))

    async def names(self) -> list[str]:
        return await self._db.read(names)

    async def stats(self, name: str) -> PoolStats:
        return await self._db.read(lambda c: stats(c, name, now()))

    async def drop(self, name: str) -> int:
        return await self._db.write(lambda c: drop(c, name))
