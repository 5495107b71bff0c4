"""The WAL's checkpoints, run by a thread of their own.

SQLite copies the write-ahead log back into the database file (a checkpoint) from
inside the commit that brings the log past ``wal_autocheckpoint`` pages (1,000): with
``synchronous=NORMAL`` that is where the log and the file are synced, two ``fsync``
calls, paid by whichever write happened to fill the log. One push in ~170 paid it:
the slowest 1 % of push commits made half the average commit's time (34 of 65 µs,
bench/README.md).

:class:`Checkpointer` runs a ``PASSIVE`` checkpoint on a connection of its own about
every :data:`FRAMES` pages of log (counted in rows changed, at most every
:data:`INTERVAL`), so the log rarely reaches the threshold and commits stop paying for
it. Durability is unchanged or better: the connections keep SQLite's
``wal_autocheckpoint`` as it was (a backstop when this thread falls behind), and the
log is synced at least as often as before. A ``PASSIVE`` checkpoint takes no write lock
and waits for nobody: writers of this and other processes go on meanwhile; one that
meets another checkpoint in progress is tried again after more rows changed.
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
#: Pages of log aimed at between two checkpoints: half of ``wal_autocheckpoint``'s
#: 1,000, so the thread comes before the commits' own checkpoint, and no more often
#: than that: each checkpoint copies the pages the log holds, and a drain's commits
#: rewrite the same few pages (one every INTERVAL cost a 10-slot drain ~15 % more CPU
#: per task).
FRAMES = 500
#: Rows changed (``total_changes`` of the writing connection) that make the first
#: checkpoint due; then as many as FRAMES pages of log took last time.
FIRST_CHANGES = 200
#: Bounds of that learned number of rows.
MIN_CHANGES, MAX_CHANGES = 20, 20_000


class Checkpointer:
    """A daemon thread that checkpoints the WAL after commits (see the module).

    Args:
        connect: Opens the thread's connection (called once, in the thread).
    """

    def __init__(self, connect: Callable[[], sqlite3.Connection]) -> None:
        self._connect = connect
        self._wanted = threading.Event()
        self._stopped = False
        #: ``total_changes`` of the writing connection at the last checkpoint asked for.
        self._changes = 0
        #: Rows changed since then that make the next one due (learned, see FRAMES).
        self._due = FIRST_CHANGES
        #: Rows changed between the last two checkpoints asked for.
        self._asked = 0
        #: Checkpoints run so far (tests and benchmarks read it).
        self.runs = 0
        self._thread = threading.Thread(target=self._loop, name="fleet-sqlite-ckpt", daemon=True)
        self._thread.start()

    def committed(self, conn: sqlite3.Connection) -> None:
        """Called after each commit on the writing connection ``conn`` (by the writer,
        in its thread or inline): once enough rows changed, a checkpoint is due."""
        changes = conn.total_changes
        if changes - self._changes >= self._due or changes < self._changes:
            self._asked = max(changes - self._changes, 1)
            self._changes = changes
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
                    _busy, frames, _copied = conn.execute(
                        "PRAGMA wal_checkpoint(PASSIVE)"
                    ).fetchone()
                    self.runs += 1
                    if frames > 0:
                        # The log held `frames` pages after `_asked` changed rows.
                        due = round(FRAMES * self._asked / frames)
                        self._due = min(max(due, MIN_CHANGES), MAX_CHANGES)
                except sqlite3.Error as exc:
                    # The commit's own autocheckpoint stays the backstop meanwhile.
                    log.debug("wal checkpoint skipped: %s", exc)
                # A burst of commits gets one checkpoint per INTERVAL, not one each.
                time.sleep(INTERVAL)
        finally:
            if conn is not None:
                conn.close()
