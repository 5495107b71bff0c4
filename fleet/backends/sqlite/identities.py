"""Identity pools on SQLite (schema v19): ``identities`` holds each identity's document
and its state columns; ``identity_leases`` the live leases (their deadlines end them);
``identity_sticky`` the identity kept for each key. A lease is one write transaction:
end the pool's expired leases, then take the first usable identity in the pool's order
(:mod:`fleet.core.identities`), walking the index ``(pool, last_used_at, id)``."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from fleet.backends.sqlite.conn import SQLiteDB
from fleet.core.capabilities.identities import Identities
from fleet.core.identities import (
    DEFAULT_COOLDOWN_SECONDS,
    DEFAULT_LEASE_SECONDS,
    DEFAULT_RETIRE_AFTER,
    IDENTITY_STATES,
    Identity,
    IdentityLease,
    IdentityPage,
    IdentityStats,
    LeaseOutcome,
    after_block,
    merged_cookies,
    parse_identity,
    state_at,
)
from fleet.core.records import dumps, new_token, now

_COLUMNS = (
    "id, doc, retired, cooling_until, leases, uses, ok, blocked, in_row, last_used_at, "
    "last_reason, created_at"
)


def _identity(row: tuple[Any, ...], at: float) -> Identity:
    (ident, doc, retired, cooling, leases, uses, ok, blocked, in_row, used, why, created) = row
    try:
        base = parse_identity(json.loads(doc))
    except (ValueError, TypeError):  # a document something else wrote: shown bare
        base = Identity(id=str(ident))
    return base.evolve(
        state=state_at(retired=bool(retired), cooling_until=cooling, leases=leases, now=at),
        leases=int(leases),
        cooling_until=cooling if cooling is not None and cooling > at else None,
        stats=IdentityStats(int(uses), int(ok), int(blocked), int(in_row), float(used), why),
        created_at=float(created),
    )


def _read(conn: sqlite3.Connection, pool: str, identity_id: str, at: float) -> Identity | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM identities WHERE pool = ? AND id = ?", (pool, identity_id)
    ).fetchone()
    return None if row is None else _identity(row, at)


def _expire(conn: sqlite3.Connection, pool: str, at: float) -> None:
    """End the pool's leases past their deadline (their identities' count goes down)."""
    gone = conn.execute(
        "DELETE FROM identity_leases WHERE pool = ? AND deadline < ? RETURNING id", (pool, at)
    ).fetchall()
    for (ident,) in gone:
        conn.execute(
            "UPDATE identities SET leases = MAX(leases - 1, 0) WHERE pool = ? AND id = ?",
            (pool, ident),
        )


def _usable(conn: sqlite3.Connection, pool: str, ident: str, at: float, limit: int) -> bool:
    row = conn.execute(
        "SELECT 1 FROM identities WHERE pool = ? AND id = ? AND retired = 0 AND "
        "(cooling_until IS NULL OR cooling_until <= ?) AND leases < ?",
        (pool, ident, at, limit),
    ).fetchone()
    return row is not None


def _first_usable(conn: sqlite3.Connection, pool: str, at: float, limit: int) -> str | None:
    row = conn.execute(
        "SELECT id FROM identities WHERE pool = ? AND retired = 0 AND "
        "(cooling_until IS NULL OR cooling_until <= ?) AND leases < ? "
        "ORDER BY last_used_at, id LIMIT 1",
        (pool, at, limit),
    ).fetchone()
    return None if row is None else str(row[0])


def lease(
    conn: sqlite3.Connection,
    pool: str,
    at: float,
    lease_seconds: float,
    limit: int,
    key: str | None,
) -> IdentityLease | None:
    """:meth:`Identities.lease` in one transaction."""
    _expire(conn, pool, at)
    chosen: str | None = None
    if key is not None:
        kept = conn.execute(
            "SELECT s.id, i.retired FROM identity_sticky s LEFT JOIN identities i "
            "ON i.pool = s.pool AND i.id = s.id WHERE s.pool = ? AND s.key = ?",
            (pool, key),
        ).fetchone()
        if kept is not None and kept[1] is not None and not kept[1]:
            if not _usable(conn, pool, kept[0], at, limit):
                return None  # its identity is busy or cooling: wait for it
            chosen = str(kept[0])
    if chosen is None:
        chosen = _first_usable(conn, pool, at, limit)
        if chosen is None:
            return None
        if key is not None:
            conn.execute(
                "INSERT INTO identity_sticky (pool, key, id) VALUES (?, ?, ?) "
                "ON CONFLICT (pool, key) DO UPDATE SET id = excluded.id",
                (pool, key, chosen),
            )
    token = new_token()
    deadline = at + lease_seconds
    conn.execute(
        "INSERT INTO identity_leases (pool, token, id, deadline) VALUES (?, ?, ?, ?)",
        (pool, token, chosen, deadline),
    )
    conn.execute(
        "UPDATE identities SET leases = leases + 1, uses = uses + 1, last_used_at = ? "
        "WHERE pool = ? AND id = ?",
        (at, pool, chosen),
    )
    held = _read(conn, pool, chosen, at)
    assert held is not None
    return IdentityLease(pool=pool, identity=held, token=token, deadline=deadline, key=key)


def release(
    conn: sqlite3.Connection,
    pool: str,
    identity_id: str,
    token: str,
    at: float,
    outcome: LeaseOutcome,
    reason: str | None,
    cookies: Sequence[dict[str, Any]] | None,
    account: dict[str, Any] | None,
    cooldown: float,
    retire_after: int,
) -> bool:
    """:meth:`Identities.release` in one transaction."""
    if (
        conn.execute(
            "DELETE FROM identity_leases WHERE pool = ? AND token = ? AND id = ? AND deadline >= ?",
            (pool, token, identity_id, at),
        ).rowcount
        == 0
    ):
        return False
    current = _read(conn, pool, identity_id, at)
    if current is None:
        return False
    stats, cooling, retired = current.stats, None, False
    if outcome == "ok":
        stats = IdentityStats(
            stats.uses, stats.ok + 1, stats.blocked, 0, stats.last_used_at, stats.last_reason
        )
    elif outcome == "blocked":
        stats, cooling, retired = after_block(
            stats, reason, at, cooldown=cooldown, retire_after=retire_after
        )
    doc = current
    if cookies is not None:
        doc = doc.evolve(cookies=tuple(merged_cookies(current.cookies, cookies, at)))
    if account is not None:
        doc = doc.evolve(account=dict(account))
    conn.execute(
        "UPDATE identities SET doc = ?, leases = MAX(leases - 1, 0), ok = ?, blocked = ?, "
        "in_row = ?, last_reason = ?, cooling_until = COALESCE(?, cooling_until), "
        "retired = MAX(retired, ?) WHERE pool = ? AND id = ?",
        (
            dumps(doc.doc()),
            stats.ok,
            stats.blocked,
            stats.blocked_in_row,
            stats.last_reason,
            cooling,
            int(retired),
            pool,
            identity_id,
        ),
    )
    return True


def put(conn: sqlite3.Connection, pool: str, identities: Sequence[Identity], at: float) -> int:
    added = 0
    for ident in identities:
        known = conn.execute(
            "SELECT 1 FROM identities WHERE pool = ? AND id = ?", (pool, ident.id)
        ).fetchone()
        added += known is None
        conn.execute(
            "INSERT INTO identities (pool, id, doc, created_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (pool, id) DO UPDATE SET doc = excluded.doc",
            (pool, ident.id, dumps(ident.doc()), at),
        )
    return added


def page(
    conn: sqlite3.Connection, pool: str, after: str | None, limit: int, at: float
) -> IdentityPage:
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM identities WHERE pool = ? AND id > ? ORDER BY id LIMIT ?",
        (pool, after or "", limit + 1),
    ).fetchall()
    items = tuple(_identity(r, at) for r in rows[:limit])
    counts: dict[str, int] = dict.fromkeys(IDENTITY_STATES, 0)
    blocks = 0
    for retired, cooling, leases, blocked in conn.execute(
        "SELECT retired, cooling_until, leases, blocked FROM identities WHERE pool = ?", (pool,)
    ):
        state = state_at(retired=bool(retired), cooling_until=cooling, leases=leases, now=at)
        counts[state] += 1
        blocks += int(blocked)
    more = len(rows) > limit and items
    return IdentityPage(items, items[-1].id if more else None, counts, blocks)


class SQLiteIdentities(Identities):
    """:class:`~fleet.core.capabilities.identities.Identities` on SQLite."""

    def __init__(self, db: SQLiteDB) -> None:
        self._db = db

    async def put(self, pool: str, identities: Sequence[Identity]) -> int:
        if not identities:
            return 0
        return await self._db.write(lambda c: put(c, pool, identities, now()))

    # A read ends the pool's expired leases first (a write): it shows what holds now.
    async def get(self, pool: str, identity_id: str) -> Identity | None:
        def go(c: sqlite3.Connection) -> Identity | None:
            at = now()
            _expire(c, pool, at)
            return _read(c, pool, identity_id, at)

        return await self._db.write(go)

    async def page(self, pool: str, *, after: str | None = None, limit: int = 50) -> IdentityPage:
        def go(c: sqlite3.Connection) -> IdentityPage:
            at = now()
            _expire(c, pool, at)
            return page(c, pool, after, limit, at)

        return await self._db.write(go)

    async def pools(self) -> list[str]:
        rows = await self._db.read(
            lambda c: c.execute("SELECT DISTINCT pool FROM identities ORDER BY pool").fetchall()
        )
        return [str(r[0]) for r in rows]

    async def lease(
        self,
        pool: str,
        *,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        max_concurrency: int = 1,
        key: str | None = None,
    ) -> IdentityLease | None:
        return await self._db.write(
            lambda c: lease(c, pool, now(), lease_seconds, max_concurrency, key)
        )

    async def renew(self, pool: str, identity_id: str, token: str, lease_seconds: float) -> bool:
        def go(c: sqlite3.Connection) -> bool:
            at = now()
            return (
                c.execute(
                    "UPDATE identity_leases SET deadline = ? WHERE pool = ? AND token = ? "
                    "AND id = ? AND deadline >= ?",
                    (at + lease_seconds, pool, token, identity_id, at),
                ).rowcount
                > 0
            )

        return await self._db.write(go)

    async def release(
        self,
        pool: str,
        identity_id: str,
        token: str,
        *,
        outcome: LeaseOutcome = "none",
        reason: str | None = None,
        cookies: Sequence[dict[str, Any]] | None = None,
        account: dict[str, Any] | None = None,
        cooldown_seconds: float = DEFAULT_COOLDOWN_SECONDS,
        retire_after: int = DEFAULT_RETIRE_AFTER,
    ) -> bool:
        return await self._db.write(
            lambda c: release(
                c,
                pool,
                identity_id,
                token,
                now(),
                outcome,
                reason,
                cookies,
                account,
                cooldown_seconds,
                retire_after,
            )
        )

    async def retire(self, pool: str, identity_id: str, reason: str | None = None) -> bool:
        return await self._update(
            pool, identity_id, "retired = 1, last_reason = COALESCE(?, last_reason)", (reason,)
        )

    async def revive(self, pool: str, identity_id: str) -> bool:
        return await self._update(
            pool, identity_id, "retired = 0, cooling_until = NULL, in_row = 0", ()
        )

    async def delete(self, pool: str, identity_id: str) -> bool:
        def go(c: sqlite3.Connection) -> bool:
            c.execute("DELETE FROM identity_leases WHERE pool = ? AND id = ?", (pool, identity_id))
            c.execute("DELETE FROM identity_sticky WHERE pool = ? AND id = ?", (pool, identity_id))
            return (
                c.execute(
                    "DELETE FROM identities WHERE pool = ? AND id = ?", (pool, identity_id)
                ).rowcount
                > 0
            )

        return await self._db.write(go)

    async def _update(self, pool: str, identity_id: str, sets: str, args: tuple[Any, ...]) -> bool:
        def go(c: sqlite3.Connection) -> bool:
            return (
                c.execute(
                    f"UPDATE identities SET {sets} WHERE pool = ? AND id = ?",
                    (*args, pool, identity_id),
                ).rowcount
                > 0
            )

        return await self._db.write(go)
