"""The WAL's checkpoints, run by a thread of their own.

SQLite copies the write-ahead log back into the database file (a checkpoint) from
inside the commit that brings the log past ``wal_autocheckpoint`` pages (1,000): with
``synchronous=NORMAL`` that is where the log and the file are synced, two ``fsync``
calls, paid by whichever write happened to fill the log. One push in ~170 paid it:
the slowest 1 % of push commits made half the average commit's time (34 of 65 µs,
bench/README.md).

:class:`Checkpointer` runs a ``PASSIVE`` checkpoint on a connection of its own soon
after each commit (at most every :data:`INTERVAL`), so the log rarely reaches the
threshold and commits stop paying for it. Durability is unchanged or better: the
connections keep SQLite's ``wal_autocheckpoint`` as it was (a backstop when this
thread falls behind), and the log is synced at least as often as before. A
``PASSIVE`` checkpoint takes no write lock and waits for nobody: writers of this and
other processes go on meanwhile; one that meets another checkpoint in progress just
tries again after the next commit.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

#: Least time between two checkpoints of one backend instance (seconds).
INTERVAL = 0.01


class Checkpointer:
    """A daemon thread that checkpoints the WAL after commits (see the module).

    Args:
        connect: Opens the thread's connection (called once, in the thread).
    """

    def __init__(self, connect: Callable[[], sqlite3.Connection]) -> None:
        self._connect = connect
        self._wanted = threading.Event()
        self._stopped = False
        #: Checkpoints run so far (tests and benchmarks read it).
        self.runs = 0
        self._thread = threading.Thread(target=self._loop, name="fleet-sqlite-ckpt", daemon=True)
        self._thread.start()

    def committed(self) -> None:
        """Called after each commit (by the writer): a checkpoint is due soon."""
        if not self._wanted.is_set():
            self._wanted.set()

    def stop(self) -> None:
        """End the thread after its current checkpoint (see :meth:`join`)."""
        self._stopped = True
        self._wanted.set()

    def join(self) -> None:
        """Wait for the thread to end (it closes its connection)."""
        self._thread.join()

    def _loop(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                self._wanted.wait()
                if self._stopped:
                    return
                self._wanted.clear()
                try:
                    if conn is None:
                        conn = self._connect()
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.runs += 1
                except sqlite3.Error as exc:
                    # The commit's own autocheckpoint stays the backstop meanwhile.
                    log.debug("wal checkpoint skipped: %s", exc)
                # A burst of commits gets one checkpoint per INTERVAL, not one each.
                time.sleep(INTERVAL)
        finally:
            if conn is not None:
                conn.close()
