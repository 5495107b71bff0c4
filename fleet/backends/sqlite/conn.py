"""Connections of the SQLite backend: threads, transactions, errors, URL.

The stdlib ``sqlite3`` driver blocks, so every statement runs in a thread and
the event loop only awaits futures. One writer thread owns the write
connection: every write is one short ``BEGIN IMMEDIATE`` transaction, or a
savepoint in a group of them (:mod:`fleet.backends.sqlite.writer`); SQLite lets
one writer at a time into a file anyway, and the busy timeout queues writers
of other processes. Reader threads own their own connections and, in
WAL mode, never wait for writers. The poller thread
(:mod:`fleet.backends.sqlite.poller`) opens its own connection with
:meth:`SQLiteDB.connect`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

from fleet.backends.base import check_namespace
from fleet.backends.sqlite.checkpoints import Checkpointer
from fleet.backends.sqlite.poller import Polled, Poller
from fleet.backends.sqlite.schema import migrate
from fleet.backends.sqlite.writer import BEGIN_ATTEMPTS, Writer, is_busy
from fleet.core.errors import BackendError, BackendUnavailable, ConfigError

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SQLiteOptions:
    """What a ``sqlite:///`` URL selects.

    Attributes:
        path: The database file (relative to the working directory or absolute).
        busy_timeout_ms: How long a writer waits for another process's write.
        poll_ms: Interval of the cross-process poller (blocked reserves, events).
        readers: Reader threads (each with its own connection).
        inline_writes: Run a write in the caller's thread when the writer thread
            is idle and the lock is free (``inline_writes=1`` in the URL). Off by
            default: with several processes on one file, inline writers can keep a
            process that waits in SQLite's busy handler from the lock for a while.
    """

    path: Path
    busy_timeout_ms: int = 5000
    poll_ms: float = 20.0
    readers: int = 2
    inline_writes: bool = False


def parse_url(url: str) -> SQLiteOptions:
    """Parse ``sqlite:///relative.db`` or ``sqlite:////absolute.db`` (+ options).

    Query options: ``busy_timeout_ms``, ``poll_ms``, ``readers``, ``inline_writes``
    (``0``, the default, or ``1``), ``namespace`` (a database file of its own beside
    the named one: ``fleet.db`` with namespace ``acme`` is ``fleet.acme.db``).

    Args:
        url: The backend URL.

    Returns:
        The options it selects.

    Raises:
        ConfigError: No path, an in-memory database (it cannot be shared between
            processes: use ``memory://``), or a malformed option.
    """
    parts = urlsplit(url)
    if parts.scheme.lower() != "sqlite":
        raise ConfigError(f"not a sqlite:// URL: {url!r}")
    if parts.netloc:
        raise ConfigError(
            f"sqlite URL {url!r} has a host; use sqlite:///relative/path.db "
            "or sqlite:////absolute/path.db"
        )
    raw = parts.path[1:] if parts.path.startswith("/") else parts.path
    if not raw:
        raise ConfigError(f"sqlite URL {url!r} names no file; e.g. sqlite:///./fleet.db")
    if raw == ":memory:" or raw.startswith("file::memory:"):
        raise ConfigError(
            "sqlite:///:memory: cannot be shared between a master and workers; "
            "use memory:// for one process or sqlite:///./fleet.db for one host"
        )
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    known = {"busy_timeout_ms", "poll_ms", "readers", "namespace", "inline_writes"}
    unknown = sorted(set(query) - known)
    if unknown:
        raise ConfigError(f"unknown sqlite URL option(s) {unknown}; known: {sorted(known)}")
    path = Path(raw)
    namespace = check_namespace(query.get("namespace", ""))
    if namespace:
        # A namespace is a database of its own beside the named one:
        # fleet.db?namespace=acme is fleet.acme.db.
        path = path.with_name(f"{path.stem}.{namespace}{path.suffix}")
    try:
        options = SQLiteOptions(
            path=path,
            busy_timeout_ms=int(query.get("busy_timeout_ms", 5000)),
            poll_ms=float(query.get("poll_ms", 20.0)),
            readers=int(query.get("readers", 2)),
            inline_writes=_flag(query.get("inline_writes", "0")),
        )
    except ValueError as exc:
        raise ConfigError(f"bad sqlite URL option in {url!r}: {exc}") from exc
    if options.poll_ms <= 0 or options.readers < 1 or options.busy_timeout_ms < 0:
        raise ConfigError(f"sqlite URL options out of range in {url!r}")
    return options


def _flag(text: str) -> bool:
    if text not in ("0", "1"):
        raise ValueError(f"inline_writes must be 0 or 1, not {text!r}")
    return text == "1"


def translate(exc: sqlite3.Error, path: Path) -> BackendError:
    """Our exception for a driver exception (drivers never leak to callers)."""
    if isinstance(exc, sqlite3.IntegrityError | sqlite3.ProgrammingError):
        return BackendError(f"sqlite {path}: {exc}")
    return BackendUnavailable(f"sqlite {path}: {exc}")


class SQLiteDB:
    """The threads and connections of one backend instance.

    Args:
        options: Parsed URL options.
    """

    def __init__(self, options: SQLiteOptions) -> None:
        self.options = options
        self.path = options.path
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._writer: Writer | None = None
        #: Runs the WAL's checkpoints off the commits' path (a file's backend only).
        self.checkpointer: Checkpointer | None = None
        self._readers: concurrent.futures.ThreadPoolExecutor | None = None
        #: Write operations submitted so far (to check that idle waiters do not write).
        self.write_ops = 0

    # ------------------------------------------------------------ lifecycle
    async def open(self) -> None:
        """Create the file (and its directories), enable WAL, migrate the schema.

        Raises:
            SchemaVersionError: The file is newer than this Fleet.
            BackendUnavailable: The file cannot be opened or written.
        """
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BackendUnavailable(f"sqlite {self.path}: cannot create directory: {exc}") from exc
        self.checkpointer = Checkpointer(self.connect)
        self._writer = Writer(self.connect, self._closed_error, self.checkpointer.committed)
        self._readers = self._executor(self.options.readers, "fleet-sqlite-r")
        try:
            await self.write(lambda conn: migrate(conn, str(self.path)))
        except BaseException:
            await self.close()
            raise

    def _executor(self, n: int, name: str) -> concurrent.futures.ThreadPoolExecutor:
        return concurrent.futures.ThreadPoolExecutor(max_workers=n, thread_name_prefix=name)

    async def close(self) -> None:
        """Close every connection in its own thread and stop the threads."""
        executors = [e for e in (self._readers,) if e is not None]
        writer, self._writer = self._writer, None
        self._readers = None
        if writer is not None:
            writer.stop()
            await asyncio.to_thread(writer.join)
        checkpointer, self.checkpointer = self.checkpointer, None
        if checkpointer is not None:
            checkpointer.stop()
            await asyncio.to_thread(checkpointer.join)
        for executor in executors:
            executor.shutdown(wait=False)
        await asyncio.gather(*(asyncio.to_thread(e.shutdown) for e in executors))
        with self._conns_lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            # Their threads have exited, so nothing else can use them now.
            conn.close()

    def poller(
        self,
        interval: float,
        on_change: Callable[[Polled], None],
        loop: asyncio.AbstractEventLoop,
    ) -> Poller:
        """The thread that tells a watcher what other connections changed: here one
        polling ``PRAGMA data_version`` on a connection of its own."""
        return Poller(self.connect, interval, on_change, loop)

    def _closed_error(self) -> BackendUnavailable:
        return BackendUnavailable(f"sqlite {self.path}: backend is closed")

    def connect(self) -> sqlite3.Connection:
        """A new connection with our pragmas (WAL, busy timeout, synchronous=NORMAL)."""
        conn = sqlite3.connect(
            self.path,
            isolation_level=None,
            check_same_thread=False,
            timeout=self.options.busy_timeout_ms / 1000,
        )
        conn.execute(f"PRAGMA busy_timeout = {int(self.options.busy_timeout_ms)}")
        for attempt in range(BEGIN_ATTEMPTS):
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                break
            except sqlite3.OperationalError as exc:
                if not is_busy(exc) or attempt == BEGIN_ATTEMPTS - 1:
                    raise
        conn.execute("PRAGMA synchronous = NORMAL")
        return conn

    def _connection(self) -> sqlite3.Connection:
        # Each reader thread keeps its own connection.
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self.connect()
            self._local.conn = conn
            with self._conns_lock:
                self._conns.append(conn)
        return conn

    # ------------------------------------------------------------ running work
    def _run_read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._connection()
        # One snapshot for every statement of the read.
        conn.execute("BEGIN")
        try:
            return fn(conn)
        finally:
            conn.execute("COMMIT")

    def submit_write(self, fn: Callable[[sqlite3.Connection], T]) -> concurrent.futures.Future[T]:
        """Start a write transaction without awaiting it (its result is the future's).

        Raises:
            BackendUnavailable: The backend is closed.
        """
        if self._writer is None:
            raise self._closed_error()
        self.write_ops += 1
        future: concurrent.futures.Future[T] = self._writer.submit(fn)
        return future

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` as one ``BEGIN IMMEDIATE`` transaction: at once in this
        thread when the writer thread is idle and no other process holds the lock
        (``inline_writes``), else in the writer thread.

        Raises:
            BackendUnavailable: The file cannot be written (or the backend is closed).
        """
        writer = self._writer
        if writer is not None and self.options.inline_writes:
            try:
                done, result = writer.run_inline(fn, self.options.busy_timeout_ms)
            except sqlite3.Error as exc:
                raise translate(exc, self.path) from exc
            if done:
                self.write_ops += 1
                out: T = result
                return out
        return await self.wait_future(self.submit_write(fn))

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` in a read transaction on a reader thread.

        Raises:
            BackendUnavailable: The file cannot be read (or the backend is closed).
        """
        if self._readers is None:
            raise BackendUnavailable(f"sqlite {self.path}: backend is closed")
        return await self.wait_future(self._readers.submit(self._run_read, fn))

    async def wait_future(self, future: concurrent.futures.Future[T]) -> T:
        """Await a future of :meth:`submit_write`, translating driver errors."""
        try:
            return await asyncio.wrap_future(future)
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from exc


def rows(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    """All rows of a query (a short helper so ops read like SQL)."""
    return conn.execute(sql, params).fetchall()
