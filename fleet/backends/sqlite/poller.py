"""The polling thread behind the SQLite backend's cross-process wake-ups.

Other processes cannot signal us, so a thread polls the file, and only while
someone in this process waits (a blocked reserve) or listens (a subscription);
otherwise it sleeps on an event and costs nothing. Each poll first asks
``PRAGMA data_version``, which changes only when another connection
committed; when nothing changed that is the whole cost, and the event loop is
not even woken. When something changed it reads the change counters
(``signals``) of the types being waited for and the events after its cursor,
and hands them to the event loop with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from fleet.core.outage import OutageLog, is_outage

log = logging.getLogger(__name__)

#: Events read per poll; a full batch triggers the next poll at once.
EVENT_BATCH = 1000


@dataclass(frozen=True, slots=True)
class Polled:
    """What one poll found: the data version, and (if it changed) signals and events."""

    version: int
    signals: dict[str, int] = field(default_factory=dict)
    events: list[tuple[int, str, str]] = field(default_factory=list)


def poll(
    conn: sqlite3.Connection,
    types: list[str],
    cursor: int | None,
    last_version: int | None,
    force: bool,
) -> Polled:
    """One poll (on the poller's own connection, outside a transaction).

    Args:
        conn: The poller's connection.
        types: Types with blocked reservers.
        cursor: Last event sequence read, or None when nobody listens.
        last_version: ``PRAGMA data_version`` of the previous poll.
        force: Read even if the data version did not change.

    Returns:
        The new version, and the signals/events if anything could have changed.
    """
    version = int(conn.execute("PRAGMA data_version").fetchone()[0])
    if version == last_version and not force:
        return Polled(version)
    return changes(conn, types, cursor, version)


def changes(conn: sqlite3.Connection, types: list[str], cursor: int | None, version: int) -> Polled:
    """The signals of ``types`` and the events after ``cursor`` (None: not read)."""
    signals: dict[str, int] = {}
    if types:
        marks = ",".join("?" * len(types))
        signals = dict(conn.execute(f"SELECT type, n FROM signals WHERE type IN ({marks})", types))
    events: list[tuple[int, str, str]] = []
    if cursor is not None:
        events = conn.execute(
            "SELECT seq, topic, message FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
            (cursor, EVENT_BATCH),
        ).fetchall()
    return Polled(version, signals, events)


class Poller:
    """The thread; the event loop steers it through a few plain attributes.

    Args:
        connect: Opens the poller's connection (called in the thread).
        interval: Seconds between polls while active.
        on_change: Called in the event loop with every poll that read something.
        loop: That event loop.
    """

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        interval: float,
        on_change: Callable[[Polled], None],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._connect = connect
        self._interval = interval
        self._on_change = on_change
        self._loop = loop
        self._wakeup = threading.Event()
        self._stopping = False
        # Written by the event loop, read by the thread (plain assignments).
        self.types: tuple[str, ...] = ()
        self.listening = False
        self.event_floor = 0
        self.force_gen = 0
        # Written by the thread.
        self.cursor = 0
        self.polls = 0
        self._thread = threading.Thread(target=self._run, name="fleet-sqlite-poll", daemon=True)
        self._thread.start()

    def kick(self, force: bool = False) -> None:
        """Poll now; with ``force`` read signals and events even if nothing changed."""
        if force:
            self.force_gen += 1
        self._wakeup.set()

    def stop(self) -> None:
        """Ask the thread to end (see :meth:`join`)."""
        self._stopping = True
        self._wakeup.set()

    def join(self) -> None:
        self._thread.join()

    def _active(self) -> bool:
        return bool(self.types) or self.listening

    def _idle_wait(self) -> float | None:
        """How long to sleep between polls (None: until kicked)."""
        return self._interval if self._active() else None

    def _poll(
        self, conn: sqlite3.Connection | None, cursor: int | None, version: int | None, force: bool
    ) -> tuple[sqlite3.Connection | None, Polled]:
        """One poll on the poller's own connection (opened on first use)."""
        if conn is None:
            conn = self._connect()
        return conn, poll(conn, list(self.types), cursor, version, force)

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        version: int | None = None
        forced = -1
        outages = OutageLog(log)
        try:
            while not self._stopping:
                self._wakeup.wait(self._idle_wait())
                self._wakeup.clear()
                if self._stopping:
                    break
                if not self._active():
                    continue
                force_gen = self.force_gen
                cursor = max(self.cursor, self.event_floor) if self.listening else None
                try:
                    conn, polled = self._poll(conn, cursor, version, force_gen != forced)
                except Exception as exc:
                    if isinstance(exc, sqlite3.Error) or is_outage(exc):
                        # The file is locked, gone or unreadable: one line per outage.
                        outages.failed("sqlite poller", f"{type(exc).__name__}: {exc}")
                    else:
                        log.exception("sqlite poller failed; retrying")
                    self._wakeup.wait(self._interval * 10)
                    continue
                outages.recovered("sqlite poller")
                forced = force_gen
                self.polls += 1
                version = polled.version
                if cursor is not None:
                    self.cursor = polled.events[-1][0] if polled.events else cursor
                if len(polled.events) >= EVENT_BATCH:
                    self._wakeup.set()
                if polled.signals or polled.events:
                    try:
                        self._loop.call_soon_threadsafe(self._on_change, polled)
                    except RuntimeError:  # the event loop is closed
                        return
        finally:
            if conn is not None:
                conn.close()
