"""Proxy health on SQLite (``ctx.proxy``): tables ``proxies``, ``proxy_places`` and
``proxy_sticky`` (schema version 7), one write transaction per operation.

``proxies`` has a row per proxy that was taken or reported (counters, score,
``cooling_until``; the row goes at ``forget_at``), ``proxy_places`` a row per place a
slot holds (``until``: when its hold expires), ``proxy_sticky`` a row per sticky choice.
Every take drops the expired places of its candidates, plus up to two expired places,
forgotten proxies and expired sticky choices of any key, so the tables shed unused
state as fast as they gain it.

A take or a report that names its automation type reads the type's proxy policy from
``group_defaults`` (schema version 10) in its own transaction: the stored threshold,
cool-down and cap win over the caller's.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from fleet.backends.sqlite.conn import SQLiteDB
from fleet.core.capabilities.proxies import (
    FORGET_SECONDS,
    MAX_REASON_LEN,
    ProxyHealth,
    ProxyInfo,
    ProxyPolicy,
    ProxyTake,
)
from fleet.core.proxy_health import ProxyView, hold_live, proxy_pick, proxy_report_rule
from fleet.core.records import now


def policy(conn: sqlite3.Connection, automation_type: str) -> tuple[ProxyPolicy | None, int]:
    """The type's stored proxy policy and the generation of its record (``(None, -1)``:
    nothing stored), inside the caller's transaction."""
    row = conn.execute(
        "SELECT proxy_threshold, proxy_cooldown, proxy_cap, gen FROM group_defaults WHERE type = ?",
        (automation_type,),
    ).fetchone()
    if row is None:
        return None, -1
    threshold, cooldown, cap, gen = row
    if threshold is None:
        return None, int(gen)
    return ProxyPolicy(int(threshold), float(cooldown), None if cap is None else int(cap)), int(gen)


def _stored(conn: sqlite3.Connection, automation_type: str | None) -> ProxyPolicy | None:
    return None if automation_type is None else policy(conn, automation_type)[0]


def _prune(conn: sqlite3.Connection, t: float) -> None:
    conn.execute(
        "DELETE FROM proxy_places WHERE (key, token) IN "
        "(SELECT key, token FROM proxy_places WHERE until <= ? LIMIT 2)",
        (t,),
    )
    conn.execute(
        "DELETE FROM proxies WHERE key IN (SELECT key FROM proxies WHERE forget_at <= ? LIMIT 2)",
        (t,),
    )
    conn.execute(
        "DELETE FROM proxy_sticky WHERE name IN "
        "(SELECT name FROM proxy_sticky WHERE expires_at <= ? LIMIT 2)",
        (t,),
    )


def _cooling_until(conn: sqlite3.Connection, key: str, t: float) -> float:
    row = conn.execute(
        "SELECT cooling_until FROM proxies WHERE key = ? AND forget_at > ?", (key, t)
    ).fetchone()
    return 0.0 if row is None else float(row[0])


def _touch(conn: sqlite3.Connection, key: str, t: float) -> None:
    """Move the proxy's ``forget_at`` past its last activity (now, cool-down, places)."""
    last = conn.execute("SELECT MAX(until) FROM proxy_places WHERE key = ?", (key,)).fetchone()[0]
    conn.execute(
        "UPDATE proxies SET forget_at = MAX(?, cooling_until, ?) + ? WHERE key = ?",
        (t, t if last is None else float(last), FORGET_SECONDS, key),
    )


def _ensure_row(conn: sqlite3.Connection, key: str, t: float) -> None:
    """A fresh row for ``key`` (replacing a forgotten one still on disk)."""
    conn.execute("DELETE FROM proxies WHERE key = ? AND forget_at <= ?", (key, t))
    conn.execute(
        "INSERT INTO proxies (key, forget_at) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
        (key, t + FORGET_SECONDS),
    )


def take(
    conn: sqlite3.Connection,
    candidates: Sequence[str],
    token: str,
    held: str | None,
    cap: int | None,
    hold: float,
    sticky: str | None,
    sticky_seconds: float,
    t: float,
    spread: bool = False,
    automation_type: str | None = None,
) -> ProxyTake:
    """:meth:`ProxyHealth.take` inside the caller's transaction."""
    stored = _stored(conn, automation_type)
    if stored is not None:
        cap = stored.max_concurrency
    _prune(conn, t)
    views = []
    for k in dict.fromkeys(candidates):
        conn.execute("DELETE FROM proxy_places WHERE key = ? AND until <= ?", (k, t))
        count, mine, first = conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(token = ?), 0), MIN(until) "
            "FROM proxy_places WHERE key = ?",
            (token, k),
        ).fetchone()
        first_end = None if first is None else float(first)
        views.append(ProxyView(k, _cooling_until(conn, k, t), int(count), bool(mine), first_end))
    choice = None
    if sticky is not None:
        row = conn.execute(
            "SELECT key FROM proxy_sticky WHERE name = ? AND expires_at > ?", (sticky, t)
        ).fetchone()
        choice = None if row is None else str(row[0])
    got = proxy_pick(
        views, now=t, cap=cap, sticky=sticky is not None, sticky_choice=choice, spread=spread
    )
    picked = got.key
    if picked is None:
        return got
    _ensure_row(conn, picked, t)
    conn.execute(
        "INSERT INTO proxy_places (key, token, until) VALUES (?, ?, ?) "
        "ON CONFLICT (key, token) DO UPDATE SET until = excluded.until",
        (picked, token, t + hold),
    )
    conn.execute("UPDATE proxies SET uses = uses + 1 WHERE key = ?", (picked,))
    _touch(conn, picked, t)
    if held is not None and held != picked:
        conn.execute("DELETE FROM proxy_places WHERE key = ? AND token = ?", (held, token))
    if sticky is not None:
        conn.execute(
            "INSERT INTO proxy_sticky (name, key, expires_at) VALUES (?, ?, ?) "
            "ON CONFLICT (name) DO UPDATE SET key = excluded.key, expires_at = excluded.expires_at",
            (sticky, picked, t + sticky_seconds),
        )
    return got


def renew(conn: sqlite3.Connection, key: str, token: str, hold: float, t: float) -> bool:
    """:meth:`ProxyHealth.renew` inside the caller's transaction."""
    row = conn.execute(
        "SELECT until FROM proxy_places WHERE key = ? AND token = ?", (key, token)
    ).fetchone()
    if not hold_live(None if row is None else float(row[0]), t):
        return False
    conn.execute(
        "UPDATE proxy_places SET until = ? WHERE key = ? AND token = ?", (t + hold, key, token)
    )
    _touch(conn, key, t)
    return True


def release(conn: sqlite3.Connection, key: str, token: str, t: float) -> bool:
    """:meth:`ProxyHealth.release` inside the caller's transaction."""
    row = conn.execute(
        "DELETE FROM proxy_places WHERE key = ? AND token = ? RETURNING until", (key, token)
    ).fetchone()
    return hold_live(None if row is None else float(row[0]), t)


def report(
    conn: sqlite3.Connection,
    key: str,
    ok: bool,
    threshold: int,
    cooldown: float,
    reason: str,
    t: float,
    automation_type: str | None = None,
) -> float | None:
    """:meth:`ProxyHealth.report` inside the caller's transaction."""
    stored = _stored(conn, automation_type) if not ok else None
    if stored is not None:
        threshold, cooldown = stored.bad_threshold, stored.cooldown_seconds
    _ensure_row(conn, key, t)
    score, until = conn.execute(
        "SELECT score, cooling_until FROM proxies WHERE key = ?", (key,)
    ).fetchone()
    score, until = proxy_report_rule(
        int(score), float(until), ok=ok, threshold=threshold, cooldown=cooldown, now=t
    )
    if ok:
        conn.execute(
            "UPDATE proxies SET oks = oks + 1, score = ?, cooling_until = ? WHERE key = ?",
            (score, until, key),
        )
    else:
        conn.execute(
            "UPDATE proxies SET failures = failures + 1, reason = ?, bad_at = ?, score = ?, "
            "cooling_until = ? WHERE key = ?",
            (reason[:MAX_REASON_LEN] or None, t, score, until, key),
        )
    _touch(conn, key, t)
    return until if until > t else None


def listing(conn: sqlite3.Connection, limit: int, t: float) -> list[ProxyInfo]:
    """:meth:`ProxyHealth.listing` (a read)."""
    rows = conn.execute(
        "SELECT p.key, p.uses, p.oks, p.failures, p.score, p.cooling_until, p.reason, p.bad_at, "
        "(SELECT COUNT(*) FROM proxy_places AS q WHERE q.key = p.key AND q.until > ?) "
        "FROM proxies AS p WHERE p.forget_at > ? ORDER BY p.key LIMIT ?",
        (t, t, max(0, limit)),
    ).fetchall()
    return [
        ProxyInfo(
            key=key,
            uses=int(uses),
            oks=int(oks),
            failures=int(failures),
            score=int(score),
            cooling_until=float(until) if until > t else None,
            in_use=int(in_use),
            last_reason=reason,
            last_bad_at=None if bad_at is None else float(bad_at),
        )
        for key, uses, oks, failures, score, until, reason, bad_at, in_use in rows
    ]


class SQLiteProxies(ProxyHealth):
    """Proxy health in a SQLite file: one transaction each."""

    def __init__(self, db: SQLiteDB) -> None:
        self._db = db

    async def take(
        self,
        candidates: Sequence[str],
        token: str,
        *,
        held: str | None = None,
        max_concurrency: int | None = None,
        hold_seconds: float = 30.0,
        sticky: str | None = None,
        sticky_seconds: float = 3600.0,
        spread: bool = False,
        automation_type: str | None = None,
    ) -> ProxyTake:
        keys = list(candidates)
        return await self._db.write(
            lambda c: take(
                c,
                keys,
                token,
                held,
                max_concurrency,
                hold_seconds,
                sticky,
                sticky_seconds,
                now(),
                spread,
                automation_type,
            )
        )

    async def renew(self, key: str, token: str, hold_seconds: float) -> bool:
        return await self._db.write(lambda c: renew(c, key, token, hold_seconds, now()))

    async def release(self, key: str, token: str) -> bool:
        return await self._db.write(lambda c: release(c, key, token, now()))

    async def report(
        self,
        key: str,
        *,
        ok: bool,
        threshold: int = 1,
        cooldown_seconds: float = 300.0,
        reason: str = "",
        automation_type: str | None = None,
    ) -> float | None:
        return await self._db.write(
            lambda c: report(
                c, key, ok, threshold, cooldown_seconds, reason, now(), automation_type
            )
        )

    async def policy(self, automation_type: str) -> tuple[ProxyPolicy | None, int]:
        return await self._db.read(lambda c: policy(c, automation_type))

    async def listing(self, *, limit: int = 1000) -> list[ProxyInfo]:
        return await self._db.read(lambda c: listing(c, limit, now()))

    async def sticky(self, name: str) -> str | None:
        def read(c: sqlite3.Connection) -> str | None:
            row = c.execute(
                "SELECT key FROM proxy_sticky WHERE name = ? AND expires_at > ?", (name, now())
            ).fetchone()
            return None if row is None else str(row[0])

        return await self._db.read(read)
