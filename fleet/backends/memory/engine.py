"""The SQLite engine over an in-memory database: what ``memory://`` runs on.

``memory://`` has the SQLite backend's semantics because it *is* the SQLite backend
(every rule written once, in SQL): only where the data lives differs.

* The database is a shared-cache in-memory database of this process
  (``file:<token>?mode=memory&cache=shared``): no file, nothing another process sees.
* One connection does all the work, reads included, in the writer thread or inline in
  the caller's: in shared-cache mode two connections lock each other out
  (``SQLITE_LOCKED``, which no busy timeout waits for), and in memory one connection
  is fast enough. So a read always sees every committed write.
* Other processes cannot write here, so nothing polls: every commit tells the watchers
  of every backend open on the store (:class:`LocalPoller`), which read the change
  counters and events through the same connection.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from fleet.backends.sqlite.conn import SQLiteDB, SQLiteOptions
from fleet.backends.sqlite.poller import Polled, Poller, changes
from fleet.backends.sqlite.writer import Writer

T = TypeVar("T")


class MemoryDB(SQLiteDB):
    """The engine of one ``memory://`` store, shared by every backend open on it.

    Args:
        uri: The shared-cache URI of the store's database.
        name: The store's name (for messages).
    """

    def __init__(self, uri: str, name: str) -> None:
        super().__init__(SQLiteOptions(path=Path(f"memory://{name}"), inline_writes=True))
        self.uri = uri
        self._users = 0
        self._lock = threading.Lock()
        #: Commits so far: the "data version" the local pollers watch.
        self.commits = 0
        self._pollers: weakref.WeakSet[LocalPoller] = weakref.WeakSet()

    # ------------------------------------------------------------ lifecycle
    async def open(self) -> None:
        """One more backend uses the store: the writer thread runs while any does.
        (The schema is in place: the store's database is made from a migrated one.)"""
        with self._lock:
            self._users += 1
            if self._writer is None:
                self._writer = Writer(self.connect, self._closed_error)

    async def close(self) -> None:
        """One backend less: the last one stops the thread and closes its connection
        (the store's data stays, held by its keeper, until the store is dropped)."""
        with self._lock:
            self._users = max(0, self._users - 1)
            if self._users or self._writer is None:
                return
            writer, self._writer = self._writer, None
        writer.stop()
        await asyncio.to_thread(writer.join)

    def connect(self) -> sqlite3.Connection:
        """A connection to the store's database (no WAL: there is no file)."""
        conn = sqlite3.connect(self.uri, uri=True, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 5000")
        return conn

    @property
    def running(self) -> bool:
        """True while some backend has the store open (its writer thread runs)."""
        return self._writer is not None

    # ------------------------------------------------------------ running work
    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` on the store's one connection (see the module's docstring)."""
        writer = self._writer
        if writer is None:
            raise self._closed_error()
        done, result = writer.run_inline(fn, self.options.busy_timeout_ms)
        if done:
            out: T = result
            return out
        return await self.wait_future(writer.submit(fn))

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return await super().write(fn)
        finally:
            self.changed()

    def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in a transaction of the writer thread and wait for it, from a
        thread that is not an event loop's (the local pollers)."""
        writer = self._writer
        if writer is None:
            raise self._closed_error()
        result: T = writer.submit(fn).result()
        return result

    def changed(self) -> None:
        """A write committed (or may have): wake the pollers of every backend."""
        self.commits += 1
        for poller in list(self._pollers):
            poller.kick()

    def poller(
        self,
        interval: float,
        on_change: Callable[[Polled], None],
        loop: asyncio.AbstractEventLoop,
    ) -> Poller:
        poller = LocalPoller(self, on_change, loop)
        self._pollers.add(poller)
        return poller


class LocalPoller(Poller):
    """A watcher's poller for a store of this process: it sleeps until a commit (or
    its watcher) kicks it, then reads through the store's connection."""

    def __init__(
        self,
        db: MemoryDB,
        on_change: Callable[[Polled], None],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._db = db
        super().__init__(db.connect, 0.0, on_change, loop)

    def _idle_wait(self) -> float | None:
        return None  # nothing changes here but through a commit, which kicks

    def _poll(
        self, conn: sqlite3.Connection | None, cursor: int | None, version: int | None, force: bool
    ) -> tuple[sqlite3.Connection | None, Polled]:
        commits = self._db.commits
        if commits == version and not force:
            return None, Polled(commits)
        types = list(self.types)
        return None, self._db.call(lambda c: changes(c, types, cursor, commits))
