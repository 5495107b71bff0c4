"""Plant corrupt records straight into a backend's storage, bypassing Fleet: raw
redis-py writes to the keys of docs/redis-schema.md, raw sqlite3 writes to the
tables of fleet/backends/sqlite/schema.py (for memory://, the same tables in the
store's in-memory database, fleet/backends/memory/store.py)."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import redis

from fleet.backends.memory.store import run_in_store, store_name
from fleet.backends.redis.keys import event_channel

#: A value that is not UTF-8 (so not JSON either).
NOT_UTF8 = b"\xff\xfe{\x80"
#: Worker record parts, as WorkerRecord.unreadable names them.
WORKER_PARTS = ("hardware", "config", "gen", "state", "stats")


class Planter:
    """Writes raw values where a backend keeps its records.

    Args:
        url: The backend URL (memory://, sqlite:///, redis://).
    """

    def __init__(self, url: str) -> None:
        self.url = url
        kind = url.split(":", 1)[0]
        if kind not in ("memory", "sqlite", "redis"):
            raise ValueError(url)
        # memory:// is the SQLite engine over an in-memory database: planted alike.
        self.memory = store_name(url) if kind == "memory" else None
        self.kind = "sqlite" if kind == "memory" else kind

    @property
    def holds_raw_tasks(self) -> bool:
        """True: every backend keeps its tasks as text a planter can spoil."""
        return True

    # ------------------------------------------------------------------ helpers
    def _sql(self, sql: str, params: tuple[Any, ...]) -> None:
        if self.memory is not None:
            changed = run_in_store(self.memory, sql, params)
            assert changed == 1, (sql, params)
            return
        path = self.url.removeprefix("sqlite:///")
        conn = sqlite3.connect(path, timeout=10)
        try:
            with conn:
                changed = conn.execute(sql, params).rowcount
        finally:
            conn.close()
        assert changed == 1, (sql, params)

    @staticmethod
    def _text(raw: str | bytes) -> tuple[str, Any]:
        """The SQL expression and parameter storing ``raw`` as TEXT (even if not UTF-8)."""
        return ("CAST(? AS TEXT)", raw) if isinstance(raw, bytes) else ("?", raw)

    def _redis(self) -> Any:
        return redis.Redis.from_url(self.url)

    # ------------------------------------------------------------------ records
    def catalog(self, automation_type: str, raw: str | bytes) -> None:
        """Replace the stored catalog entry of a type with ``raw``."""
        if self.kind == "sqlite":
            expr, value = self._text(raw)
            self._sql(f"UPDATE catalog SET entry = {expr} WHERE type = ?", (value, automation_type))
        else:
            client = self._redis()
            client.hset("fleet:catalog", automation_type, raw)
            client.close()

    def worker(self, automation_type: str, worker_id: str, part: str, raw: str | bytes) -> None:
        """Replace one part (hardware, config, gen, state, stats) of a registered
        worker's record with ``raw``; on Redis a ``state`` is written as a string,
        so the hash is a key of the wrong type."""
        assert part in WORKER_PARTS, part
        if self.kind == "sqlite":
            expr, value = self._text(raw)
            self._sql(
                f"UPDATE workers SET {part} = {expr} WHERE type = ? AND id = ?",
                (value, automation_type, worker_id),
            )
        else:
            client = self._redis()
            key = f"wkr:{automation_type}:{worker_id}:{part}"
            client.delete(key)
            client.set(key, raw)
            client.close()

    def dead(self, automation_type: str, task_id: str, raw: str | bytes) -> None:
        """Append ``raw`` to the type's DLQ."""
        if self.kind == "sqlite":
            expr, value = self._text(raw)
            self._sql(
                f"INSERT INTO dead (type, id, body, dead_at) VALUES (?, ?, {expr}, 1.0)",
                (automation_type, task_id, value),
            )
        elif self.kind == "redis":
            client = self._redis()
            client.rpush(f"fleet:queue:{automation_type}:dead", raw)
            client.close()

    def event(self, topic: str, raw: str) -> None:
        """Publish ``raw`` as an event's message, not JSON-encoded."""
        if self.kind == "sqlite":
            self._sql(
                "INSERT INTO events (topic, message, ts) VALUES (?, ?, ?)",
                (topic, raw, time.time()),
            )
        else:
            client = self._redis()
            client.publish(event_channel(topic), raw)
            client.close()

    def task_body(self, automation_type: str, task_id: str, raw: str | bytes) -> None:
        """Replace the stored body of a queued task (SQLite only: Redis bodies are
        pushed raw with :meth:`push_head`)."""
        assert self.kind == "sqlite", self.kind
        expr, value = self._text(raw)
        self._sql(
            f"UPDATE tasks SET body = {expr} WHERE type = ? AND id = ?",
            (value, automation_type, task_id),
        )

    def push_head(self, automation_type: str, raw: str | bytes) -> None:
        """Put ``raw`` at the head of the type's normal tier (Redis only)."""
        assert self.kind == "redis", self.kind
        client = self._redis()
        client.lpush(f"fleet:queue:{automation_type}", raw)
        client.close()
