"""Webhooks on SQLite: tables ``webhooks`` (a row per subscription, its JSON) and
``webhook_deliveries`` (a row per logged delivery), schema version 24. A log update is
one write transaction deciding by :func:`fleet.core.webhooks.merged` and
:func:`~fleet.core.webhooks.dropped`."""

from __future__ import annotations

import json
import sqlite3

from fleet.backends.sqlite.conn import SQLiteDB
from fleet.core.capabilities.webhooks import Webhooks
from fleet.core.records import dumps
from fleet.core.webhooks import LOG_KEEP, Delivery, Hook, dropped, merged


def _hook(body: str) -> Hook | None:
    try:
        return Hook.from_dict(json.loads(body))
    except (ValueError, KeyError, TypeError):
        return None


def _delivery(body: str) -> Delivery | None:
    try:
        return Delivery.from_dict(json.loads(body))
    except (ValueError, KeyError, TypeError):
        return None


def log(conn: sqlite3.Connection, hook_id: str, update: Delivery, keep: int) -> Delivery | None:
    """:meth:`Webhooks.log` inside the caller's write transaction."""
    if conn.execute("SELECT 1 FROM webhooks WHERE id = ?", (hook_id,)).fetchone() is None:
        return None
    row = conn.execute(
        "SELECT body FROM webhook_deliveries WHERE hook = ? AND event = ?",
        (hook_id, update.event_id),
    ).fetchone()
    entry = merged(None if row is None else _delivery(row[0]), update)
    conn.execute(
        "INSERT INTO webhook_deliveries (hook, event, created_at, body) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (hook, event) DO UPDATE SET body = excluded.body",
        (hook_id, entry.event_id, entry.created_at, dumps(entry.to_dict())),
    )
    if row is None:
        order = conn.execute(
            "SELECT created_at, event FROM webhook_deliveries WHERE hook = ?", (hook_id,)
        ).fetchall()
        gone = dropped([(float(t), str(e)) for t, e in order], keep)
        conn.executemany(
            "DELETE FROM webhook_deliveries WHERE hook = ? AND event = ?",
            [(hook_id, e) for e in gone],
        )
    return entry


def _put(conn: sqlite3.Connection, hook: Hook) -> None:
    conn.execute(
        "INSERT INTO webhooks (id, created_at, body) VALUES (?, ?, ?) "
        "ON CONFLICT (id) DO UPDATE SET body = excluded.body",
        (hook.id, hook.created_at, dumps(hook.to_dict())),
    )


def _delete(conn: sqlite3.Connection, hook_id: str) -> bool:
    conn.execute("DELETE FROM webhook_deliveries WHERE hook = ?", (hook_id,))
    return conn.execute("DELETE FROM webhooks WHERE id = ?", (hook_id,)).rowcount > 0


def _page(conn: sqlite3.Connection, hook_id: str, offset: int, limit: int) -> list[Delivery]:
    rows = conn.execute(
        "SELECT body FROM webhook_deliveries WHERE hook = ? "
        "ORDER BY created_at DESC, event DESC LIMIT ? OFFSET ?",
        (hook_id, limit, offset),
    ).fetchall()
    return [d for d in (_delivery(r[0]) for r in rows) if d is not None]


class SQLiteWebhooks(Webhooks):
    """Subscriptions and delivery logs in the SQLite file."""

    def __init__(self, db: SQLiteDB) -> None:
        self._db = db

    async def put(self, hook: Hook) -> None:
        await self._db.write(lambda c: _put(c, hook))

    async def get(self, hook_id: str) -> Hook | None:
        row = await self._db.read(
            lambda c: c.execute("SELECT body FROM webhooks WHERE id = ?", (hook_id,)).fetchone()
        )
        return None if row is None else _hook(row[0])

    async def all(self) -> list[Hook]:
        rows = await self._db.read(
            lambda c: c.execute("SELECT body FROM webhooks ORDER BY created_at, id").fetchall()
        )
        return [h for h in (_hook(r[0]) for r in rows) if h is not None]

    async def delete(self, hook_id: str) -> bool:
        return await self._db.write(lambda c: _delete(c, hook_id))

    async def log(self, hook_id: str, update: Delivery, keep: int = LOG_KEEP) -> Delivery | None:
        return await self._db.write(lambda c: log(c, hook_id, update, keep))

    async def deliveries(self, hook_id: str, *, offset: int = 0, limit: int = 50) -> list[Delivery]:
        return await self._db.read(lambda c: _page(c, hook_id, max(offset, 0), max(limit, 0)))
