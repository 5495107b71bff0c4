"""Configs of the SQLite backend: partial configs with the generation they were
stored at (table ``config``), the generation counter (``generations``) and each
worker's desired config (``workers.config``/``gen``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from fleet.backends.sqlite.conn import SQLiteDB
from fleet.core.capabilities.configs import Configs
from fleet.core.config_book import ConfigBook
from fleet.core.records import dumps
from fleet.core.stored import config_of, desired_config, generation_of

#: ``config.worker_id`` of the type-wide config.
TYPE_WIDE = ""


def stored(
    conn: sqlite3.Connection, automation_type: str, worker_id: str | None = None
) -> dict[str, Any]:
    """The stored partial config of a type (type-wide, or a worker's override): ``{}``
    for none, or one that cannot be read. What the steps that read a fleet-wide setting
    in their transaction (a domain's tier rule, a daily budget) read."""
    row = conn.execute(
        "SELECT CAST(config AS BLOB) FROM config WHERE type = ? AND worker_id = ?",
        (automation_type, worker_id or TYPE_WIDE),
    ).fetchone()
    return {} if row is None else config_of(row[0])


class SQLiteConfigs(Configs):
    """The configs of a SQLite file: one transaction each."""

    def __init__(self, db: SQLiteDB) -> None:
        self._db = db

    async def get(self, automation_type: str, worker_id: str | None = None) -> dict[str, Any]:
        return await self._db.read(lambda c: stored(c, automation_type, worker_id))

    async def set(
        self, automation_type: str, config: dict[str, Any], worker_id: str | None = None
    ) -> None:
        await self._db.write(
            lambda c: c.execute(
                "INSERT INTO config (type, worker_id, config) VALUES (?, ?, ?) "
                "ON CONFLICT (type, worker_id) DO UPDATE SET config = excluded.config",
                (automation_type, worker_id or TYPE_WIDE, dumps(config)),
            )
        )

    async def publish(
        self,
        automation_type: str,
        config: dict[str, Any],
        worker_id: str | None = None,
        *,
        floor: int = 0,
    ) -> int:
        def publish(c: sqlite3.Connection) -> int:
            gen = next_generation(c, automation_type, floor)
            c.execute(
                "INSERT OR REPLACE INTO config (type, worker_id, config, gen) VALUES (?, ?, ?, ?)",
                (automation_type, worker_id or TYPE_WIDE, dumps(config), gen),
            )
            return gen

        return await self._db.write(publish)

    async def book(self, automation_type: str, worker_ids: Sequence[str]) -> ConfigBook:
        wanted = {TYPE_WIDE, *worker_ids}
        rows = await self._db.read(
            lambda c: c.execute(
                "SELECT worker_id, CAST(config AS BLOB), "
                "CASE typeof(gen) WHEN 'integer' THEN gen ELSE CAST(gen AS BLOB) END "
                "FROM config WHERE type = ?",
                (automation_type,),
            ).fetchall()
        )
        found = {
            wid: (config_of(raw), generation_of(gen)) for wid, raw, gen in rows if wid in wanted
        }
        type_wide, type_gen = found.pop(TYPE_WIDE, ({}, 0))
        return ConfigBook(type_wide, type_gen, found)

    async def next_generation(self, automation_type: str, *, floor: int = 0) -> int:
        return await self._db.write(lambda c: next_generation(c, automation_type, floor))

    async def put_desired(
        self, automation_type: str, worker_id: str, config: dict[str, Any], gen: int
    ) -> bool:
        return await self._db.write(
            lambda c: worker_config_put(c, automation_type, worker_id, config, gen)
        )

    async def desired(
        self, automation_type: str, worker_id: str
    ) -> tuple[dict[str, Any] | None, int]:
        return await self._db.read(lambda c: worker_config_get(c, automation_type, worker_id))


def worker_config_put(
    conn: sqlite3.Connection,
    automation_type: str,
    worker_id: str,
    config: dict[str, Any],
    gen: int,
) -> bool:
    # A stored config or generation that cannot be read is replaced by any write.
    changed = conn.execute(
        "INSERT INTO workers (type, id, config, gen) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (type, id) DO UPDATE SET config = excluded.config, gen = excluded.gen "
        "WHERE workers.gen < excluded.gen OR typeof(workers.gen) != 'integer' "
        "OR (workers.config IS NOT NULL AND NOT (CASE WHEN json_valid(workers.config) "
        "THEN json_type(workers.config) = 'object' ELSE 0 END))",
        (automation_type, worker_id, dumps(config), gen),
    ).rowcount
    return changed == 1


def worker_config_get(
    conn: sqlite3.Connection, automation_type: str, worker_id: str
) -> tuple[dict[str, Any] | None, int]:
    row = conn.execute(
        "SELECT CAST(config AS BLOB), "
        "CASE typeof(gen) WHEN 'integer' THEN gen ELSE CAST(gen AS BLOB) END "
        "FROM workers WHERE type = ? AND id = ?",
        (automation_type, worker_id),
    ).fetchone()
    if row is None:
        return None, 0
    return desired_config(row[0], row[1])


def next_generation(conn: sqlite3.Connection, automation_type: str, floor: int = 0) -> int:
    row = conn.execute(
        "INSERT INTO generations (type, gen) VALUES (?, ? + 1) "
        "ON CONFLICT (type) DO UPDATE SET gen = max(gen, ?) + 1 RETURNING gen",
        (automation_type, max(floor, 0), max(floor, 0)),
    ).fetchone()
    return int(row[0])
