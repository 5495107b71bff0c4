"""Proxy tiers per domain on SQLite (schema v20): the table ``domains`` holds one row per
``(type, domain)``, its verdict counts as a JSON object. A record is one write
transaction: read the type's type-wide config (its numbers win over the caller's rule),
read the row, run :func:`fleet.core.tiers.step` at the backend's now, write the row.
Pages walk the primary key ``(type, domain)``."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from fleet.backends.sqlite.configs import stored
from fleet.backends.sqlite.conn import SQLiteDB
from fleet.core.blocks.verdicts import VerdictKind
from fleet.core.capabilities.domains import Domains
from fleet.core.records import dumps, now
from fleet.core.tier_store import (
    check_limit,
    check_record,
    check_tier,
    placed,
    state_of,
    stored_rule,
)
from fleet.core.tiers import DomainPage, DomainTier, TierRule, TierStep, check_domain, step

_COLUMNS = (
    "domain, tier, since, window_start, window_blocks, probe_streak, counts, last_kind, "
    "last_vendor, last_at, changes"
)


def _counts(raw: Any) -> Any:
    try:
        return json.loads(raw) if isinstance(raw, str | bytes) else None
    except ValueError:  # text something else wrote: no counts
        return None


def _state(row: tuple[Any, ...]) -> DomainTier:
    domain, tier, since, start, blocks, streak, counts, kind, vendor, at, changes = row
    return state_of(
        str(domain),
        {
            "tier": tier,
            "since": since,
            "window_start": start,
            "window_blocks": blocks,
            "probe_streak": streak,
            "counts": _counts(counts),
            "last_kind": kind,
            "last_vendor": vendor,
            "last_at": at,
            "changes": changes,
        },
    )


def read(conn: sqlite3.Connection, automation_type: str, domain: str) -> DomainTier | None:
    """A domain's stored state, or None."""
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM domains WHERE type = ? AND domain = ?", (automation_type, domain)
    ).fetchone()
    return None if row is None else _state(row)


def write(conn: sqlite3.Connection, automation_type: str, s: DomainTier) -> None:
    conn.execute(
        f"INSERT OR REPLACE INTO domains (type, {_COLUMNS}) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            automation_type,
            s.domain,
            s.tier,
            s.since,
            s.window_start,
            s.window_blocks,
            s.probe_streak,
            dumps(s.counts),
            s.last_kind,
            s.last_vendor,
            s.last_at,
            s.changes,
        ),
    )


def record(
    conn: sqlite3.Connection,
    automation_type: str,
    domain: str,
    tier: int,
    kind: VerdictKind,
    vendor: str | None,
    rule: TierRule,
    count: int,
    at: float,
) -> TierStep:
    """:meth:`Domains.record` in one transaction."""
    rule = stored_rule(stored(conn, automation_type), rule)
    result = step(
        read(conn, automation_type, domain),
        rule,
        domain=domain,
        tier=tier,
        kind=kind,
        vendor=vendor,
        now=at,
        count=count,
    )
    write(conn, automation_type, result.state)
    return result


def page(
    conn: sqlite3.Connection, automation_type: str, after: str | None, limit: int
) -> DomainPage:
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM domains WHERE type = ? AND domain > ? ORDER BY domain LIMIT ?",
        (automation_type, after or "", limit + 1),
    ).fetchall()
    items = tuple(_state(r) for r in rows[:limit])
    return DomainPage(items, items[-1].domain if len(rows) > limit else None)


class SQLiteDomains(Domains):
    """:class:`~fleet.core.capabilities.domains.Domains` on SQLite."""

    def __init__(self, db: SQLiteDB) -> None:
        self._db = db

    async def get(self, automation_type: str, domain: str) -> DomainTier | None:
        name = check_domain(domain)
        return await self._db.read(lambda c: read(c, automation_type, name))

    async def record_counts(
        self,
        automation_type: str,
        counts: Sequence[tuple[str, int, VerdictKind, int]],
        *,
        rule: TierRule,
    ) -> list[TierStep]:
        """All of them in one write transaction (one commit for a second of verdicts)."""
        checked = [check_record(d, t, k, None, n) for d, t, k, n in counts]
        at = now()
        return await self._db.write(
            lambda c: [
                record(c, automation_type, name, tier, kind, vendor, rule, n, at)
                for name, tier, kind, vendor, n in checked
            ]
        )

    async def record(
        self,
        automation_type: str,
        domain: str,
        *,
        tier: int,
        kind: VerdictKind,
        vendor: str | None = None,
        rule: TierRule,
        count: int = 1,
    ) -> TierStep:
        name, tier, kind, vendor, count = check_record(domain, tier, kind, vendor, count)
        return await self._db.write(
            lambda c: record(c, automation_type, name, tier, kind, vendor, rule, count, now())
        )

    async def page(
        self, automation_type: str, *, after: str | None = None, limit: int = 50
    ) -> DomainPage:
        n = check_limit(limit)
        return await self._db.read(lambda c: page(c, automation_type, after, n))

    async def set_tier(self, automation_type: str, domain: str, tier: int) -> DomainTier:
        name, t = check_domain(domain), check_tier(tier)

        def go(c: sqlite3.Connection) -> DomainTier:
            s = placed(read(c, automation_type, name), name, t, now())
            write(c, automation_type, s)
            return s

        return await self._db.write(go)

    async def forget(self, automation_type: str, domain: str) -> bool:
        name = check_domain(domain)
        return await self._db.write(
            lambda c: (
                c.execute(
                    "DELETE FROM domains WHERE type = ? AND domain = ?", (automation_type, name)
                ).rowcount
                > 0
            )
        )
