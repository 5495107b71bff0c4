"""Error groups on SQLite (schema v23): ``error_groups`` holds one row per type and
group (the key's parts, count, first and last seen, domains and sample as JSON),
indexed by ``(type, last_seen, grp)`` for pages; ``error_snapshots`` one row per
snapshot (its description as JSON, its HTML and PNG), indexed by age.

A record is one write transaction: prune up to
:data:`~fleet.core.error_groups.PRUNE_PER_WRITE` expired groups and snapshots, then per
delta read the group, apply :func:`fleet.core.error_groups.merged` and write it back. A
put runs :func:`fleet.core.error_groups.evicted` over the type's held snapshots (one
indexed read of their sizes) in the same transaction as its insert.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from fleet.backends.sqlite.conn import SQLiteDB
from fleet.core.capabilities.errors import ErrorGroups
from fleet.core.error_docs import domains_of, meta_doc, meta_of, sample_doc, sample_of
from fleet.core.error_groups import (
    PRUNE_PER_WRITE,
    TTL_SECONDS,
    ErrorGroup,
    GroupDelta,
    GroupPage,
    Held,
    Snapshot,
    check_group,
    check_limit,
    check_snapshot_id,
    cursor_of,
    evicted,
    merged,
    parse_cursor,
)
from fleet.core.records import now

_COLUMNS = "grp, exc, message, location, count, first_seen, last_seen, domains, sample"


def _group(row: Sequence[Any]) -> ErrorGroup:
    return ErrorGroup(
        str(row[0]),
        str(row[1]),
        str(row[2]),
        str(row[3]),
        int(row[4]),
        float(row[5]),
        float(row[6]),
        domains_of(row[7]),
        sample_of(row[8]),
    )


def prune(conn: sqlite3.Connection, at: float) -> None:
    """Delete up to :data:`PRUNE_PER_WRITE` expired groups and snapshots, oldest first."""
    edge = at - TTL_SECONDS
    conn.execute(
        "DELETE FROM error_groups WHERE (type, grp) IN (SELECT type, grp FROM error_groups "
        "WHERE last_seen <= ? ORDER BY last_seen LIMIT ?)",
        (edge, PRUNE_PER_WRITE),
    )
    conn.execute(
        "DELETE FROM error_snapshots WHERE rowid IN (SELECT rowid FROM error_snapshots "
        "WHERE taken_at <= ? ORDER BY taken_at LIMIT ?)",
        (edge, PRUNE_PER_WRITE),
    )


def read_group(conn: sqlite3.Connection, automation_type: str, group: str) -> ErrorGroup | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM error_groups WHERE type = ? AND grp = ?", (automation_type, group)
    ).fetchone()
    return None if row is None else _group(row)


def record(
    conn: sqlite3.Connection, automation_type: str, deltas: Sequence[GroupDelta], at: float
) -> None:
    """:meth:`ErrorGroups.record` in the caller's transaction."""
    prune(conn, at)
    for delta in deltas:
        old = read_group(conn, automation_type, delta.group)
        if old is not None and old.last_seen + TTL_SECONDS <= at:
            old = None  # expired, not pruned yet: starts again
        g = merged(old, delta)
        conn.execute(
            f"INSERT OR REPLACE INTO error_groups (type, {_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                automation_type,
                g.group,
                g.exc,
                g.message,
                g.location,
                g.count,
                g.first_seen,
                g.last_seen,
                json.dumps(list(g.domains)),
                sample_doc(g.sample),
            ),
        )


def put(
    conn: sqlite3.Connection, automation_type: str, group: str, snap: Snapshot, at: float
) -> bool:
    """:meth:`ErrorGroups.put` in the caller's transaction."""
    prune(conn, at)
    meta = snap.meta
    conn.execute(
        "DELETE FROM error_snapshots WHERE type = ? AND grp = ? AND id = ?",
        (automation_type, group, meta.id),
    )
    held = [
        Held(str(g), str(i), float(t), int(b))
        for g, i, t, b in conn.execute(
            "SELECT grp, id, taken_at, bytes FROM error_snapshots WHERE type = ? AND taken_at > ?",
            (automation_type, at - TTL_SECONDS),
        )
    ]
    keep, gone = evicted(held, Held(group, meta.id, meta.taken_at, meta.bytes))
    if not keep:
        return False
    conn.executemany(
        "DELETE FROM error_snapshots WHERE type = ? AND grp = ? AND id = ?",
        [(automation_type, g, i) for g, i in gone],
    )
    conn.execute(
        "INSERT INTO error_snapshots (type, grp, id, taken_at, bytes, meta, html, png) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            automation_type,
            group,
            meta.id,
            meta.taken_at,
            meta.bytes,
            meta_doc(meta),
            snap.html,
            snap.png,
        ),
    )
    return True


def page(
    conn: sqlite3.Connection,
    automation_type: str,
    after: tuple[float, str] | None,
    limit: int,
    at: float,
) -> GroupPage:
    sql = f"SELECT {_COLUMNS} FROM error_groups WHERE type = ? AND last_seen > ?"
    args: list[Any] = [automation_type, at - TTL_SECONDS]
    if after is not None:
        sql += " AND (last_seen < ? OR (last_seen = ? AND grp < ?))"
        args += [after[0], after[0], after[1]]
    args.append(limit + 1)
    rows = conn.execute(sql + " ORDER BY last_seen DESC, grp DESC LIMIT ?", args).fetchall()
    items = tuple(_group(r) for r in rows[:limit])
    return GroupPage(items, cursor_of(items[-1]) if len(rows) > limit else None)


def get(conn: sqlite3.Connection, automation_type: str, group: str, at: float) -> ErrorGroup | None:
    g = read_group(conn, automation_type, group)
    if g is None or g.last_seen + TTL_SECONDS <= at:
        return None
    snaps = tuple(
        meta_of(str(i), t, m)
        for i, t, m in conn.execute(
            "SELECT id, taken_at, meta FROM error_snapshots WHERE type = ? AND grp = ? "
            "AND taken_at > ? ORDER BY taken_at DESC, id DESC",
            (automation_type, group, at - TTL_SECONDS),
        )
    )
    return replace(g, snapshots=snaps)


def snapshot(
    conn: sqlite3.Connection, automation_type: str, group: str, snapshot_id: str, at: float
) -> Snapshot | None:
    row = conn.execute(
        "SELECT taken_at, meta, html, png FROM error_snapshots "
        "WHERE type = ? AND grp = ? AND id = ? AND taken_at > ?",
        (automation_type, group, snapshot_id, at - TTL_SECONDS),
    ).fetchone()
    if row is None:
        return None
    html = None if row[2] is None else bytes(row[2])
    png = None if row[3] is None else bytes(row[3])
    return Snapshot(meta_of(snapshot_id, row[0], row[1]), html, png)


def purge_type(conn: sqlite3.Connection, automation_type: str) -> None:
    """Drop a purged type's groups and snapshots."""
    conn.execute("DELETE FROM error_groups WHERE type = ?", (automation_type,))
    conn.execute("DELETE FROM error_snapshots WHERE type = ?", (automation_type,))


class SQLiteErrors(ErrorGroups):
    """:class:`~fleet.core.capabilities.errors.ErrorGroups` on SQLite."""

    def __init__(self, db: SQLiteDB) -> None:
        self._db = db

    async def record(self, automation_type: str, deltas: Sequence[GroupDelta]) -> None:
        for d in deltas:
            check_group(d.group)
        if deltas:
            rows = list(deltas)
            await self._db.write(lambda c: record(c, automation_type, rows, now()))

    async def put(self, automation_type: str, group: str, snapshot: Snapshot) -> bool:
        check_group(group)
        check_snapshot_id(snapshot.meta.id)
        return await self._db.write(lambda c: put(c, automation_type, group, snapshot, now()))

    async def page(
        self, automation_type: str, *, cursor: str | None = None, limit: int = 50
    ) -> GroupPage:
        after, n = parse_cursor(cursor), check_limit(limit)
        return await self._db.read(lambda c: page(c, automation_type, after, n, now()))

    async def get(self, automation_type: str, group: str) -> ErrorGroup | None:
        g = check_group(group)
        return await self._db.read(lambda c: get(c, automation_type, g, now()))

    async def snapshot(self, automation_type: str, group: str, snapshot_id: str) -> Snapshot | None:
        g, s = check_group(group), check_snapshot_id(snapshot_id)
        return await self._db.read(lambda c: snapshot(c, automation_type, g, s, now()))

    async def forget(self, automation_type: str) -> None:
        await self._db.write(lambda c: purge_type(c, automation_type))
