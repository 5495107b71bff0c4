"""The history of the SQLite backend: tables ``history`` (a row per bucket: type,
resolution, start, the vector as text) and ``history_last`` (a row per type: the totals
of its last record), schema version 14. ``fleet.core.history`` decides every step.

A record first looks in a read transaction whether anything changed or expired; only
then does it take the write lock, and the write transaction decides again from what it
reads itself (the read only spares idle types a write).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from fleet.backends.sqlite.conn import SQLiteDB
from fleet.core.capabilities.history import History
from fleet.core.history import (
    HOUR,
    HOUR_KEEP_SECONDS,
    MINUTE,
    MINUTE_KEEP_SECONDS,
    QUEUE_COUNTERS,
    Reported,
    add,
    bucket_start,
    decode,
    delta,
    encode,
    totals,
)


def _current(conn: sqlite3.Connection, automation_type: str, reported: Reported) -> list[int]:
    counters = dict(
        conn.execute("SELECT name, value FROM task_counters WHERE type = ?", (automation_type,))
    )
    return totals({n: int(counters.get(n, 0)) for n in QUEUE_COUNTERS}, reported)


def _last(conn: sqlite3.Connection, automation_type: str) -> list[int] | None:
    row = conn.execute(
        "SELECT vals FROM history_last WHERE type = ?", (automation_type,)
    ).fetchone()
    return None if row is None else decode(row[0])


# A bucket expires at start + keep: it is gone once start <= t - keep.
_EXPIRED = (
    "SELECT 1 FROM history WHERE type = ? AND ((res = ? AND start <= ?) OR "
    "(res = ? AND start <= ?)) LIMIT 1"
)
_TRIM = "DELETE FROM history WHERE type = ? AND res = ? AND start <= ?"


def _cutoffs(automation_type: str, t: float) -> tuple[str, int, float, int, float]:
    return (automation_type, MINUTE, t - MINUTE_KEEP_SECONDS, HOUR, t - HOUR_KEEP_SECONDS)


def needs_write(
    conn: sqlite3.Connection, automation_type: str, reported: Reported, t: float
) -> bool:
    """Whether a record at ``t`` would change anything (a read transaction's check)."""
    if _current(conn, automation_type, reported) != _last(conn, automation_type):
        return True
    return conn.execute(_EXPIRED, _cutoffs(automation_type, t)).fetchone() is not None


def _bump(
    conn: sqlite3.Connection, automation_type: str, resolution: int, t: float, diff: list[int]
) -> None:
    start = bucket_start(t, resolution)
    row = conn.execute(
        "SELECT vals FROM history WHERE type = ? AND res = ? AND start = ?",
        (automation_type, resolution, start),
    ).fetchone()
    merged = add(None if row is None else decode(row[0]), diff)
    conn.execute(
        "INSERT INTO history (type, res, start, vals) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (type, res, start) DO UPDATE SET vals = excluded.vals",
        (automation_type, resolution, start, encode(merged)),
    )


def record(conn: sqlite3.Connection, automation_type: str, reported: Reported, t: float) -> bool:
    """:meth:`History.record` inside the caller's write transaction."""
    current = _current(conn, automation_type, reported)
    last = _last(conn, automation_type)
    diff = delta(last, current)
    wrote = any(diff)
    if wrote:
        _bump(conn, automation_type, MINUTE, t, diff)
        _bump(conn, automation_type, HOUR, t, diff)
    if current != last:
        conn.execute(
            "INSERT INTO history_last (type, vals) VALUES (?, ?) "
            "ON CONFLICT (type) DO UPDATE SET vals = excluded.vals",
            (automation_type, encode(current)),
        )
    _, m, m_cut, h, h_cut = _cutoffs(automation_type, t)
    conn.execute(_TRIM, (automation_type, m, m_cut))
    conn.execute(_TRIM, (automation_type, h, h_cut))
    return wrote


def buckets(
    conn: sqlite3.Connection, automation_type: str, resolution: int, starts: Sequence[int]
) -> dict[int, list[int]]:
    """:meth:`History.buckets` in the caller's read transaction."""
    if not starts:
        return {}
    out: dict[int, list[int]] = {}
    for start, vals in conn.execute(
        "SELECT start, vals FROM history WHERE type = ? AND res = ? AND start BETWEEN ? AND ?",
        (automation_type, resolution, min(starts), max(starts)),
    ):
        vector = decode(vals)
        if vector is not None:
            out[int(start)] = vector
    wanted = set(starts)
    return {s: v for s, v in out.items() if s in wanted}


class SQLiteHistory(History):
    """The history of a SQLite file: a read to look, one write transaction to record."""

    def __init__(self, db: SQLiteDB) -> None:
        self._db = db

    async def record(self, automation_type: str, at: float, reported: Reported) -> bool:
        if not await self._db.read(lambda c: needs_write(c, automation_type, reported, at)):
            return False
        return await self._db.write(lambda c: record(c, automation_type, reported, at))

    async def buckets(
        self, automation_type: str, resolution: int, starts: Sequence[int]
    ) -> dict[int, list[int]]:
        return await self._db.read(lambda c: buckets(c, automation_type, resolution, starts))
