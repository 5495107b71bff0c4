"""The limiters of the SQLite backend (``ctx.limit``): tables ``limiters`` and
``limit_holders`` (schema version 5), one write transaction per operation.

``limit_holders`` has a row per place held (``until``: when the hold expires);
``limiters`` a row per limiter with a rate (``tat``, and ``forget_at`` = one
interval after it, when it stops mattering). Every acquire drops the expired
holders of its limiter, plus up to two expired holders and two forgotten rate
rows of any limiter, so the tables shed unused state as fast as they gain it.
"""

from __future__ import annotations

import sqlite3

from fleet.backends.sqlite.conn import SQLiteDB
from fleet.core.capabilities.limits import Limiters
from fleet.core.limiter import LimiterView, hold_live, limit_acquire_rule
from fleet.core.records import now


def _prune(conn: sqlite3.Connection, key: str, t: float) -> None:
    conn.execute("DELETE FROM limit_holders WHERE key = ? AND until <= ?", (key, t))
    conn.execute(
        "DELETE FROM limit_holders WHERE (key, token) IN "
        "(SELECT key, token FROM limit_holders WHERE until <= ? LIMIT 2)",
        (t,),
    )
    conn.execute(
        "DELETE FROM limiters WHERE key IN (SELECT key FROM limiters WHERE forget_at <= ? LIMIT 2)",
        (t,),
    )


def acquire(
    conn: sqlite3.Connection,
    key: str,
    token: str,
    interval: float | None,
    concurrency: int | None,
    hold: float,
    t: float,
) -> float:
    """:meth:`Limiters.acquire` inside the caller's transaction."""
    _prune(conn, key, t)
    held, first, holding = conn.execute(
        "SELECT COUNT(*), MIN(until), COALESCE(SUM(token = ?), 0) FROM limit_holders WHERE key = ?",
        (token, key),
    ).fetchone()
    tat = 0.0
    if interval is not None:
        row = conn.execute(
            "SELECT tat FROM limiters WHERE key = ? AND forget_at > ?", (key, t)
        ).fetchone()
        tat = 0.0 if row is None else float(row[0])
    view = LimiterView(bool(holding), int(held), None if first is None else float(first), tat)
    grant = limit_acquire_rule(view, now=t, interval=interval, concurrency=concurrency)
    if not grant.taken:
        return grant.wait
    conn.execute(
        "INSERT INTO limit_holders (key, token, until) VALUES (?, ?, ?) "
        "ON CONFLICT (key, token) DO UPDATE SET until = excluded.until",
        (key, token, t + hold),
    )
    if grant.tat is not None and interval is not None:
        conn.execute(
            "INSERT INTO limiters (key, tat, forget_at) VALUES (?, ?, ?) ON CONFLICT (key) "
            "DO UPDATE SET tat = excluded.tat, forget_at = excluded.forget_at",
            (key, grant.tat, grant.tat + interval),
        )
    return 0.0


def renew(conn: sqlite3.Connection, key: str, token: str, hold: float, t: float) -> bool:
    """:meth:`Limiters.renew` inside the caller's transaction."""
    row = conn.execute(
        "SELECT until FROM limit_holders WHERE key = ? AND token = ?", (key, token)
    ).fetchone()
    if not hold_live(None if row is None else float(row[0]), t):
        return False
    conn.execute(
        "UPDATE limit_holders SET until = ? WHERE key = ? AND token = ?", (t + hold, key, token)
    )
    return True


def release(conn: sqlite3.Connection, key: str, token: str, t: float) -> bool:
    """:meth:`Limiters.release` inside the caller's transaction."""
    row = conn.execute(
        "DELETE FROM limit_holders WHERE key = ? AND token = ? RETURNING until", (key, token)
    ).fetchone()
    return hold_live(None if row is None else float(row[0]), t)


class SQLiteLimits(Limiters):
    """The limiters of a SQLite file: one write transaction each."""

    def __init__(self, db: SQLiteDB) -> None:
        self._db = db

    async def acquire(
        self,
        key: str,
        token: str,
        *,
        interval: float | None,
        concurrency: int | None,
        hold_seconds: float,
    ) -> float:
        return await self._db.write(
            lambda c: acquire(c, key, token, interval, concurrency, hold_seconds, now())
        )

    async def renew(self, key: str, token: str, hold_seconds: float) -> bool:
        return await self._db.write(lambda c: renew(c, key, token, hold_seconds, now()))

    async def release(self, key: str, token: str) -> bool:
        return await self._db.write(lambda c: release(c, key, token, now()))
