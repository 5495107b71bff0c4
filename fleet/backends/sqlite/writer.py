"""The writer thread of the SQLite backend, with group commit.

Every write operation of a backend instance goes through one thread that owns
the write connection. When several operations are queued at once (ten slots
acking together, a burst of pushes), the thread runs them in one ``BEGIN
IMMEDIATE`` transaction, each inside its own ``SAVEPOINT``: an operation that
fails is rolled back alone, the others commit together, and nobody gets an
answer before the ``COMMIT`` succeeded. Each operation therefore stays atomic
(all of it or none of it survives a crash) while the fixed cost of a
transaction is paid once per group instead of once per call.

With ``inline_writes=1`` in the URL, a write made while the thread has
nothing to do runs at once in the caller's thread instead
(:meth:`Writer.run_inline`), on the same connection under the same lock:
handing it to the thread and its answer back costs more than the write
(one-by-one pushes: 4,500 -> 10,400/s, bench/README.md). It never waits
there: if another process holds the write lock it goes to the thread, which
waits with the busy timeout, and so do the writes of the next
``INLINE_PAUSE_SECONDS``, so that processes sharing the file keep taking
turns.
"""

from __future__ import annotations

import concurrent.futures
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any

#: Attempts at ``BEGIN IMMEDIATE`` when the busy timeout runs out under contention.
BEGIN_ATTEMPTS = 3
#: Most operations committed together (bounds how long other processes wait).
MAX_GROUP = 64
#: After another process held the lock at an inline attempt, writes go through the
#: writer thread for this long (seconds): processes that take turns at the lock
#: then wait in the busy handler alike, instead of the inline ones starving it.
INLINE_PAUSE_SECONDS = 0.5

Operation = Callable[[sqlite3.Connection], Any]
_Job = tuple[Operation, "concurrent.futures.Future[Any]"]


def is_busy(exc: sqlite3.OperationalError) -> bool:
    """True for "database is locked/busy" (another process holds the write lock)."""
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def begin_immediate(conn: sqlite3.Connection) -> None:
    """``BEGIN IMMEDIATE``, retried when another process kept the lock past the timeout."""
    for attempt in range(BEGIN_ATTEMPTS):
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or attempt == BEGIN_ATTEMPTS - 1:
                raise


class Writer:
    """One thread running write operations in (grouped) transactions.

    Args:
        connect: Opens the write connection (called once, in the thread).
        closed_error: Builds the exception for operations submitted after stop.
        on_commit: Called with the connection in the committing thread after each
            commit (the WAL's checkpointer, :mod:`fleet.backends.sqlite.checkpoints`).
    """

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        closed_error: Callable[[], Exception],
        on_commit: Callable[[sqlite3.Connection], None] | None = None,
    ) -> None:
        self._connect = connect
        self._on_commit = on_commit
        #: Held while the connection runs a transaction (the thread's or an inline one).
        self._busy = threading.Lock()
        #: Monotonic time before which no write runs inline (see INLINE_PAUSE_SECONDS).
        self._inline_after = 0.0
        #: The busy timeout to set back before the thread's next transaction, while
        #: inline writes left the connection's at 0 (None: it is the URL's).
        self._restore_timeout_ms: int | None = None
        self._closed_error = closed_error
        self._conn: sqlite3.Connection | None = None
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._stopped = False
        #: False once the stop was taken from the queue (the loop ends after its group).
        self._running = True
        # Daemon: a backend never closed must not keep the interpreter alive.
        self._thread = threading.Thread(target=self._loop, name="fleet-sqlite-w", daemon=True)
        self._thread.start()

    def submit(self, op: Operation) -> concurrent.futures.Future[Any]:
        """Queue ``op``; the future resolves after its transaction committed."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        if self._stopped:
            future.set_exception(self._closed_error())
        else:
            self._queue.put((op, future))
        return future

    def stop(self) -> None:
        """Finish queued operations, then end the thread (see :meth:`join`)."""
        self._stopped = True
        self._queue.put(None)

    def join(self) -> None:
        """Wait for the thread to end and close its connection."""
        self._thread.join()

    def _loop(self) -> None:
        while self._running:
            job = self._queue.get()
            if job is None:
                break
            live = [job] if job[1].set_running_or_notify_cancel() else []
            self._gather(live)
            if live:
                # Answer only once the lock is free: a caller resumed by its answer
                # finds the writer idle and may write inline.
                with self._busy:
                    outcomes = self._run_group(live)
                    if self._on_commit is not None and self._conn is not None:
                        self._on_commit(self._conn)
                for (ok, value), (_, future) in zip(outcomes, live, strict=True):
                    if ok:
                        future.set_result(value)
                    else:
                        future.set_exception(value)
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _gather(self, jobs: list[_Job]) -> None:
        """Add the operations queued now to ``jobs`` (not those whose caller cancelled),
        up to ``MAX_GROUP`` in all; a stop among them ends the loop once ``jobs`` are done."""
        while len(jobs) < MAX_GROUP and self._running:
            try:
                more = self._queue.get_nowait()
            except queue.Empty:
                return
            if more is None:
                self._running = False
                return
            if more[1].set_running_or_notify_cancel():
                jobs.append(more)

    def run_inline(self, op: Operation, busy_timeout_ms: int) -> tuple[bool, Any]:
        """Run ``op`` in its own transaction now, in the calling thread, if the
        writer is idle and the write lock is free: ``(True, result)``. Otherwise,
        or if another process took the lock meanwhile, nothing was written:
        ``(False, None)``, and the caller submits ``op`` to the thread.

        Raises:
            Exception: What ``op`` raised (its transaction rolled back).
        """
        if self._stopped or self._conn is None or not self._queue.empty():
            return False, None
        if self._inline_after and time.monotonic() < self._inline_after:
            return False, None
        if not self._busy.acquire(blocking=False):
            return False, None
        conn = self._conn
        try:
            # Never wait for another process here: the caller's thread may be an
            # event loop. The writer thread waits instead (it sets the timeout back
            # before its next transaction: two statements less per inline write).
            if self._restore_timeout_ms is None:
                conn.execute("PRAGMA busy_timeout = 0")
                self._restore_timeout_ms = int(busy_timeout_ms)
            try:
                conn.execute("BEGIN IMMEDIATE")
                result = op(conn)
                conn.execute("COMMIT")
                if self._on_commit is not None:
                    self._on_commit(conn)
            except BaseException as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.OperationalError) and is_busy(exc):
                    self._inline_after = time.monotonic() + INLINE_PAUSE_SECONDS
                    return False, None
                raise
            return True, result
        finally:
            self._busy.release()

    def _run_group(self, jobs: list[_Job]) -> list[tuple[bool, Any]]:
        """Run ``jobs`` in one transaction: per job, (True, result) or (False, exception).
        The operations queued while the lock was awaited join them (``jobs`` grows)."""
        outcomes: list[tuple[bool, Any]] = []
        try:
            if self._conn is None:
                self._conn = self._connect()
            conn = self._conn
            if self._restore_timeout_ms is not None:  # an inline write set it to 0
                conn.execute(f"PRAGMA busy_timeout = {self._restore_timeout_ms}")
                self._restore_timeout_ms = None
            begin_immediate(conn)
            # Another process may have held the lock a while: what was queued meanwhile
            # commits with this group instead of waiting for the lock once more.
            self._gather(jobs)
            try:
                if len(jobs) == 1:
                    outcomes.append((True, jobs[0][0](conn)))
                else:
                    outcomes = [_in_savepoint(conn, op) for op, _ in jobs]
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except Exception as exc:
            return [(False, exc)] * len(jobs)
        return outcomes


def _in_savepoint(conn: sqlite3.Connection, op: Operation) -> tuple[bool, Any]:
    conn.execute("SAVEPOINT op")
    try:
        result = op(conn)
    except Exception as exc:
        conn.execute("ROLLBACK TO op")
        conn.execute("RELEASE op")
        return False, exc
    conn.execute("RELEASE op")
    return True, result
