"""The named stores behind ``memory://<name>`` URLs.

Every open of the same URL in one process shares one store, so a worker, a master
and a test in one process see the same data; different names are independent. A
store is an in-memory SQLite database (:mod:`fleet.backends.memory.engine`), held
open by a *keeper* connection: it lives until :func:`drop_store`, like a file that
stays after the last connection closes.
"""

from __future__ import annotations

import sqlite3
import threading
import uuid
from dataclasses import dataclass
from urllib.parse import urlsplit

from fleet.backends.memory.engine import MemoryDB
from fleet.backends.sqlite.schema import migrate


@dataclass(slots=True)
class _Store:
    keeper: sqlite3.Connection
    db: MemoryDB


_stores: dict[str, _Store] = {}
_lock = threading.Lock()
_template: sqlite3.Connection | None = None


def store_name(url: str) -> str:
    """``memory://name`` → ``name`` (``default`` when empty)."""
    parts = urlsplit(url)
    name = (parts.netloc + parts.path).strip("/")
    return name or "default"


def _migrated() -> sqlite3.Connection:
    """A database with the current schema and no data: each new store starts as a
    copy of it (a copy costs far less than running every migration again)."""
    global _template
    if _template is None:
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        conn.execute("BEGIN IMMEDIATE")
        migrate(conn, "memory://")
        conn.execute("COMMIT")
        _template = conn
    return _template


def get_db(name: str) -> MemoryDB:
    """The engine of the store ``name``, made empty (with the schema) on first use."""
    with _lock:
        store = _stores.get(name)
        if store is None:
            uri = f"file:fleet-memory-{uuid.uuid4().hex}?mode=memory&cache=shared"
            keeper = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            _migrated().backup(keeper)
            store = _stores[name] = _Store(keeper, MemoryDB(uri, name))
        return store.db


def drop_store(name: str) -> bool:
    """Forget the store ``name`` (its data goes once no backend holds it open);
    True if it existed."""
    with _lock:
        store = _stores.pop(name, None)
    if store is None:
        return False
    store.keeper.close()
    return True


def run_in_store(name: str, sql: str, params: tuple[object, ...] = ()) -> int:
    """Run one statement on the store's database, bypassing Fleet (tests plant
    corrupt records with it); its row count."""
    with _lock:
        store = _stores[name]
    if store.db.running:  # through the engine's connection: no lock between the two
        return store.db.call(lambda conn: conn.execute(sql, params).rowcount)
    store.keeper.execute("BEGIN IMMEDIATE")
    try:
        changed = store.keeper.execute(sql, params).rowcount
    except BaseException:
        store.keeper.execute("ROLLBACK")
        raise
    store.keeper.execute("COMMIT")
    return changed
