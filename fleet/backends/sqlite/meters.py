"""Meters on SQLite (schema v21): ``meters`` holds one row per ``(scope, meter)`` (its
sum, a REAL); every scope with a row is named once more, in ``meter_scopes`` (the
scopes that are listed, pages by name over its primary key) or, for an hour scope, in
``meter_hours`` (with when it is gone, indexed: the prune reads the oldest first).

An add is one write transaction: delete up to
:data:`~fleet.core.meter_store.PRUNE_PER_ADD` hour scopes gone at the backend's now,
then per scope read its meters, apply :func:`fleet.core.meters.added` (the cap on
names) and write the meters it changed; a ``run:`` scope past its run's budget pauses
the run (``runs.spent``), in the same transaction. Sums are Python floats added once per batch,
as ``lua/meters.lua`` adds them, so both engines hold the same bits.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from fleet.backends.sqlite import day_budget, runs
from fleet.backends.sqlite.conn import SQLiteDB
from fleet.backends.sqlite.signals import signal
from fleet.core.capabilities.meters import Meters
from fleet.core.meter_store import (
    PRUNE_PER_ADD,
    check_batch,
    check_page,
    check_prefix,
    check_scopes,
    expires,
    gone,
    prefix_end,
    stored_value,
)
from fleet.core.meters import DayHold, MeterBatch, added, type_scope
from fleet.core.records import now

RUN_PREFIX = "run:"
HOUR_PREFIX = "hour:"


def read(conn: sqlite3.Connection, scope: str) -> dict[str, float]:
    """A scope's stored meters (values that are not finite numbers read as 0)."""
    return {
        str(m): stored_value(v)
        for m, v in conn.execute("SELECT meter, value FROM meters WHERE scope = ?", (scope,))
    }


def prune(conn: sqlite3.Connection, at: float) -> None:
    """Delete up to :data:`PRUNE_PER_ADD` hour scopes gone at ``at``, oldest first."""
    doomed = conn.execute(
        "SELECT scope FROM meter_hours WHERE expires <= ? ORDER BY expires, scope LIMIT ?",
        (at, PRUNE_PER_ADD),
    ).fetchall()
    for (scope,) in doomed:
        conn.execute("DELETE FROM meters WHERE scope = ?", (scope,))
        conn.execute("DELETE FROM meter_hours WHERE scope = ?", (scope,))


def add(conn: sqlite3.Connection, rows: dict[str, list[tuple[str, float]]], at: float) -> None:
    """:meth:`Meters.add` of checked rows, in the caller's transaction."""
    prune(conn, at)
    for scope, row in rows.items():
        if gone(scope, at):
            continue
        after = added(read(conn, scope), dict(row))
        changed = [(scope, meter, after[meter]) for meter, _ in row if meter in after]
        if not changed:
            continue  # every name past the cap
        conn.executemany(
            "INSERT INTO meters (scope, meter, value) VALUES (?, ?, ?) "
            "ON CONFLICT (scope, meter) DO UPDATE SET value = excluded.value",
            changed,
        )
        end = expires(scope)
        if end is None:
            conn.execute("INSERT OR IGNORE INTO meter_scopes (scope) VALUES (?)", (scope,))
        else:
            conn.execute(
                "INSERT OR IGNORE INTO meter_hours (scope, expires) VALUES (?, ?)", (scope, end)
            )
        if scope.startswith(RUN_PREFIX):
            # A run past its budget pauses in the step that took it past.
            runs.spent(conn, scope[len(RUN_PREFIX) :], after, at)
        elif scope.startswith(HOUR_PREFIX):
            # The type's day grew: past its daily budget, its dispatch is held.
            day_budget.check(conn, scope[len(HOUR_PREFIX) :].rsplit(":", 1)[0], at)


def get(conn: sqlite3.Connection, scopes: Sequence[str], at: float) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for scope in scopes:
        if gone(scope, at):
            continue
        found = read(conn, scope)
        if found:
            out[scope] = found
    return out


def page(conn: sqlite3.Connection, prefix: str, after: str, limit: int) -> list[str]:
    end = prefix_end(prefix)
    sql = "SELECT scope FROM meter_scopes WHERE scope >= ? AND scope > ?"
    args: list[object] = [prefix, after]
    if end is not None:
        sql += " AND scope < ?"
        args.append(end)
    args.append(limit)
    return [str(s) for (s,) in conn.execute(sql + " ORDER BY scope LIMIT ?", args)]


def forget(conn: sqlite3.Connection, prefix: str) -> int:
    """Drop every scope starting with ``prefix``; how many scopes were named."""
    end = prefix_end(prefix)
    where, args = "scope >= ?", [prefix]
    if end is not None:
        where, args = "scope >= ? AND scope < ?", [prefix, end]
    conn.execute(f"DELETE FROM meters WHERE {where}", args)
    listed = conn.execute(f"DELETE FROM meter_scopes WHERE {where}", args).rowcount
    hours = conn.execute(f"DELETE FROM meter_hours WHERE {where}", args).rowcount
    return int(listed) + int(hours)


def drop(conn: sqlite3.Connection, scope: str) -> int:
    """Drop one scope by its exact name; 1 if it was known."""
    conn.execute("DELETE FROM meters WHERE scope = ?", (scope,))
    listed = conn.execute("DELETE FROM meter_scopes WHERE scope = ?", (scope,)).rowcount
    hours = conn.execute("DELETE FROM meter_hours WHERE scope = ?", (scope,)).rowcount
    return int(listed) + int(hours)


def purge_type(conn: sqlite3.Connection, automation_type: str) -> None:
    """A purged type's meters: ``type:<type>`` (that name only: ``type:<type>x`` is
    another type's), its ``domain:<type>:`` and ``hour:<type>:`` scopes. Type names
    hold no ``:``, so neither prefix reaches another type's scopes."""
    drop(conn, type_scope(automation_type))
    forget(conn, f"domain:{automation_type}:")
    forget(conn, f"hour:{automation_type}:")


class SQLiteMeters(Meters):
    """:class:`~fleet.core.capabilities.meters.Meters` on SQLite."""

    def __init__(self, db: SQLiteDB, kick: Callable[[], None] = lambda: None) -> None:
        self._db = db
        self._kick = kick  # the watcher: reservers of this process look again

    async def add(self, batch: MeterBatch) -> None:
        rows = check_batch(batch)
        if rows:
            await self._db.write(lambda c: add(c, rows, now()))

    async def get(self, scopes: Sequence[str]) -> dict[str, dict[str, float]]:
        names = check_scopes(scopes)
        if not names:
            return {}
        return await self._db.read(lambda c: get(c, names, now()))

    async def scopes(self, prefix: str, *, after: str | None = None, limit: int = 50) -> list[str]:
        p, a, n = check_page(prefix, after, limit)
        return await self._db.read(lambda c: page(c, p, a, n))

    async def held(self, automation_type: str) -> DayHold | None:
        def read(c: sqlite3.Connection) -> DayHold | None:
            row = c.execute(
                "SELECT until, reason FROM type_pauses WHERE type = ? AND until > ?",
                (automation_type, now()),
            ).fetchone()
            return None if row is None else DayHold(float(row[0]), str(row[1]))

        return await self._db.read(read)

    async def unhold(self, automation_type: str) -> bool:
        def write(c: sqlite3.Connection) -> bool:
            had = day_budget.release(c, automation_type)
            if had:
                signal(c, automation_type, 1)
            return had

        had = await self._db.write(write)
        if had:
            self._kick()
        return had

    async def forget(self, prefix: str) -> int:
        p = check_prefix(prefix)
        return await self._db.write(lambda c: forget(c, p))
