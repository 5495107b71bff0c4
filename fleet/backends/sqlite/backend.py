"""``sqlite:///path``: a one-host fleet on a single file, safe across processes.

A master and any number of worker processes on one machine share one SQLite
file in WAL mode. Every operation is one short transaction (``BEGIN
IMMEDIATE`` when it writes), so two processes can never both reserve a task
and a crash between statements loses or duplicates nothing. Statements run in
threads (see :mod:`fleet.backends.sqlite.conn`); blocked reserves and event
subscriptions of other processes are woken by one cheap poller per backend
instance (see :mod:`fleet.backends.sqlite.watch`).

URL forms: ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``,
options ``?busy_timeout_ms=5000&poll_ms=20&readers=2``. Parent directories are
created. ``sqlite:///:memory:`` is refused: use ``memory://`` in one process.

Operations notes:

* Keep the file on a local disk: WAL mode shares memory between the processes
  (the ``-shm`` file) and does not work over NFS/SMB. One host only; a fleet of
  machines runs on Redis.
* ``-wal`` and ``-shm`` next to the file belong to it: copy the database with
  ``sqlite3 fleet.db ".backup copy.db"``, not ``cp``, while processes run.
* ``synchronous=NORMAL``: a killed process loses nothing committed; a power
  cut may lose the last few commits but never corrupts the file.
* A blocked reserve or a subscription sees other processes' changes within
  ``poll_ms`` (20 ms by default); while nothing changes a poll is one
  ``PRAGMA data_version`` in a background thread.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from fleet.backends.base import STREAM_MAX_AGE, STREAM_MAX_LEN
from fleet.backends.sqlite import pools, records
from fleet.backends.sqlite import queue as q
from fleet.backends.sqlite import queue_admin as qa
from fleet.backends.sqlite import state as st
from fleet.backends.sqlite.browse import SQLiteBrowse
from fleet.backends.sqlite.configs import SQLiteConfigs
from fleet.backends.sqlite.conn import SQLiteDB, parse_url
from fleet.backends.sqlite.groups import Book
from fleet.backends.sqlite.history import SQLiteHistory
from fleet.backends.sqlite.limits import SQLiteLimits
from fleet.backends.sqlite.primitives import SQLitePrimitives
from fleet.backends.sqlite.proxies import SQLiteProxies
from fleet.backends.sqlite.runs import SQLiteRuns
from fleet.backends.sqlite.schedules import SQLiteSchedules
from fleet.backends.sqlite.watch import SQLiteSubscription, Watcher
from fleet.core.capabilities.proxies import ProxyPolicy
from fleet.core.capabilities.queues import Taken
from fleet.core.flow import GroupInfo, GroupLimits, GroupPage, GroupSettings
from fleet.core.records import (
    CancelOutcome,
    LeaseStatus,
    NackOutcome,
    PoolClaim,
    PoolItem,
    PoolStats,
    PoolStrategy,
    PushRequest,
    PushResult,
    QueueDepths,
    StreamEntry,
    TaskBody,
    TaskInfo,
    now,
)
from fleet.core.results import output_record, progress_record, progress_topic

log = logging.getLogger(__name__)

T = TypeVar("T")


class SQLiteBackend(SQLitePrimitives):
    """The SQLite backend (see the module docstring).

    Args:
        url: ``sqlite:///path/to/fleet.db`` (+ options).

    Raises:
        ConfigError: The URL is malformed or names an in-memory database.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self._db = SQLiteDB(parse_url(url))
        self._watcher = Watcher(self._db, self._db.options.poll_ms / 1000)
        self.configs = SQLiteConfigs(self._db)
        self.schedules = SQLiteSchedules(self._db)
        self.runs = SQLiteRuns(self._db, self._watcher, qa.run_cancel)
        self.browse = SQLiteBrowse(self._db, self._watcher.wake)
        self.limits = SQLiteLimits(self._db)
        self.history = SQLiteHistory(self._db)
        self.proxies = SQLiteProxies(self._db)
        self.proxies.salts = self
        self._connected = False
        self._closed = False

    @property
    def watcher_polls(self) -> int:
        """How many cross-process polls this instance made (for idle-cost checks)."""
        return self._watcher.polls

    @property
    def write_ops(self) -> int:
        """How many write operations this instance submitted (for idle-cost checks)."""
        return self._db.write_ops

    # ------------------------------------------------------------ lifecycle
    async def connect(self) -> None:
        if self._connected:
            return
        await self._db.open()
        self._connected = True

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._watcher.close()
        await self._db.close()

    async def ping(self) -> bool:
        try:
            return bool(await self._db.read(lambda c: c.execute("SELECT 1").fetchone()[0] == 1))
        except Exception:
            return False

    # ------------------------------------------------------------ task queues
    async def push(self, automation_type: str, requests: Sequence[PushRequest]) -> list[PushResult]:
        if not requests:
            return []
        pushed = await self._db.write(lambda c: q.push(c, automation_type, requests, now()))
        if pushed.signal:
            self._watcher.wake(
                automation_type, pushed.ready, pushed.signal, len(requests) - _dupes(pushed)
            )
        return pushed.results

    async def _take(
        self,
        automation_type: str,
        k: int,
        visibility_seconds: float,
        default_max_attempts: int,
    ) -> Taken:
        reserved: q.Reserved = await self._db.write(
            lambda c: q.reserve(
                c,
                automation_type,
                k=k,
                visibility_seconds=visibility_seconds,
                default_max_attempts=default_max_attempts,
                now=now(),
            )
        )
        if len(reserved.reservations) >= k:
            self._watcher.wake(automation_type, 1)  # there may be more: one more looks
        return Taken(reserved.reservations, reserved.next_due, reserved.signal, reserved.expired)

    async def _wait_for_work(self, automation_type: str, signal: int, seconds: float) -> bool:
        return await self._watcher.wait(automation_type, signal, seconds)

    async def ack(self, automation_type: str, leases: Sequence[tuple[str, str]]) -> list[bool]:
        if not leases:
            return []
        # An ack may give a saturated group its budget back (the signal moves).
        return await self._write_waking(
            automation_type, lambda c: q.ack(c, automation_type, leases, now())
        )

    async def nack(
        self,
        automation_type: str,
        task_id: str,
        token: str,
        *,
        delay_seconds: float,
        error: str | None = None,
        traceback: str | None = None,
        dead: bool = False,
    ) -> NackOutcome:
        return await self._write_waking(
            automation_type,
            lambda c: q.nack(
                c,
                automation_type,
                task_id,
                token,
                delay_seconds=delay_seconds,
                error=error,
                traceback=traceback,
                dead=dead,
                now=now(),
            ),
        )

    async def release(self, automation_type: str, task_id: str, token: str) -> bool:
        done = await self._db.write(lambda c: q.release(c, automation_type, task_id, token, now()))
        if done:
            self._watcher.wake(automation_type, 1)
        return done

    async def extend(
        self, automation_type: str, task_id: str, token: str, visibility_seconds: float
    ) -> LeaseStatus:
        return await self._db.write(
            lambda c: q.extend(c, automation_type, task_id, token, visibility_seconds, now())
        )

    async def mark_started(
        self, automation_type: str, leases: Sequence[tuple[str, str]]
    ) -> list[bool]:
        if not leases:
            return []
        return await self._db.write(lambda c: q.mark_started(c, automation_type, leases, now()))

    async def sweep(self, automation_type: str) -> int:
        requeued = await self._db.write(lambda c: q.sweep(c, automation_type, now()))
        if requeued:
            self._watcher.wake(automation_type, requeued)
        return requeued

    async def dead_peek(self, automation_type: str, n: int = 50) -> list[TaskBody]:
        return await self._db.read(lambda c: qa.dead_peek(c, automation_type, n))

    async def dead_replay(
        self, automation_type: str, *, n: int | None = None, task_ids: Sequence[str] | None = None
    ) -> int:
        replayed = await self._db.write(
            lambda c: qa.dead_replay(c, automation_type, n=n, task_ids=task_ids, now=now())
        )
        if replayed:
            self._watcher.wake(automation_type, replayed)
        return replayed

    async def dead_clear(self, automation_type: str) -> int:
        return await self._db.write(lambda c: qa.dead_clear(c, automation_type))

    async def depths(self, automation_type: str) -> QueueDepths:
        return await self._db.read(lambda c: qa.depths(c, automation_type, now()))

    async def task_state(self, automation_type: str, task_id: str) -> TaskInfo:
        return await self._db.read(lambda c: qa.task_state(c, automation_type, task_id, now()))

    async def cancel(self, automation_type: str, task_id: str) -> CancelOutcome:
        return await self._db.write(lambda c: qa.cancel(c, automation_type, task_id, now()))

    async def purge_type(self, automation_type: str) -> None:
        await self._db.write(lambda c: qa.purge_type(c, automation_type))

    async def _write_waking(self, automation_type: str, op: Callable[[sqlite3.Connection], T]) -> T:
        """Run a write that may make tasks deliverable, and wake as many local
        reservers as it moved the type's signal (other processes' pollers see it)."""

        def run(conn: sqlite3.Connection) -> tuple[T, int, int]:
            before = q.read_signal(conn, automation_type)
            return op(conn), before, q.read_signal(conn, automation_type)

        out, before, after = await self._db.write(run)
        if after != before:
            self._watcher.wake(automation_type, after - before, after, after - before)
        return out

    # ------------------------------------------------------------ task groups
    async def throttle(
        self, automation_type: str, task_id: str, token: str, *, retry_after: float
    ) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            done = _on_groups(
                conn, automation_type, lambda book: book.throttle(task_id, token, retry_after)
            )
            if done:
                q.count(conn, automation_type, "throttled")
                row = conn.execute(
                    "SELECT run FROM tasks WHERE type = ? AND id = ?", (automation_type, task_id)
                ).fetchone()
                if row is not None and row[0] is not None:
                    q.run_event(conn, row[0], automation_type, "requeued", now())
            return done

        return await self._write_waking(automation_type, op)

    async def group_list(
        self, automation_type: str, *, after: str | None = None, limit: int = 1000
    ) -> GroupPage:
        # A write: listing deletes the rows of groups that hold nothing any more.
        return await self._db.write(lambda c: Book(c, automation_type, now()).page(after, limit))

    async def group_info(self, automation_type: str, group: str) -> GroupInfo:
        return await self._db.read(lambda c: Book(c, automation_type, now()).info(group))

    async def group_set(self, automation_type: str, group: str, settings: GroupSettings) -> None:
        await self._write_waking(
            automation_type,
            lambda c: _on_groups(c, automation_type, lambda book: book.configure(group, settings)),
        )

    async def group_reset(self, automation_type: str, group: str) -> None:
        await self._write_waking(
            automation_type,
            lambda c: _on_groups(c, automation_type, lambda book: book.configure(group, None)),
        )

    async def group_defaults_set(
        self,
        automation_type: str,
        limits: GroupLimits,
        *,
        gen: int,
        proxy: ProxyPolicy | None = None,
    ) -> bool:
        return await self._write_waking(
            automation_type,
            lambda c: _on_groups(
                c, automation_type, lambda book: book.set_defaults(limits, gen, proxy)
            ),
        )

    async def group_defaults(self, automation_type: str) -> tuple[GroupLimits, int]:
        return await self._db.read(lambda c: Book(c, automation_type, now()).defaults())

    # ------------------------------------------------------------ streams
    async def stream_push(
        self,
        automation_type: str,
        payload: Any,
        *,
        worker_id: str,
        max_len: int = STREAM_MAX_LEN,
        max_age: float = STREAM_MAX_AGE,
        task_id: str | None = None,
        attempt: int | None = None,
    ) -> StreamEntry:
        def push(c: sqlite3.Connection) -> StreamEntry:
            entry = st.stream_push(
                c,
                automation_type,
                payload,
                worker_id=worker_id,
                max_len=max_len,
                max_age=max_age,
                now=now(),
                task_id=task_id,
                attempt=attempt,
            )
            if task_id is not None:
                output = output_record(entry.id, entry.ts, attempt, entry.payload)
                records.add_output(c, automation_type, task_id, output, entry.ts)
            return entry

        entry = await self._db.write(push)
        self._watcher.kick()
        return entry

    async def task_progress(
        self,
        automation_type: str,
        task_id: str,
        *,
        attempt: int,
        fraction: float | None,
        message: str | None,
    ) -> None:
        def report(c: sqlite3.Connection) -> None:
            t = now()
            progress = progress_record(fraction, message, attempt, t)
            records.set_progress(c, automation_type, task_id, progress, t)
            st.publish(c, progress_topic(automation_type), {"task_id": task_id, **progress}, t)

        await self._db.write(report)
        self._watcher.kick()

    async def stream_pop(self, automation_type: str, n: int = 1) -> list[StreamEntry]:
        return await self._db.write(lambda c: st.stream_pop(c, automation_type, n))

    async def stream_peek(self, automation_type: str, n: int = 10) -> list[StreamEntry]:
        return await self._db.read(
            lambda c: st.stream_range(c, automation_type, after=None, n=n, newest=False)
        )

    async def stream_read(
        self, automation_type: str, *, after: str | None = None, n: int = 100
    ) -> list[StreamEntry]:
        return await self._db.read(
            lambda c: st.stream_range(c, automation_type, after=after, n=n, newest=False)
        )

    async def stream_tail(self, automation_type: str, n: int = 20) -> list[StreamEntry]:
        return await self._db.read(
            lambda c: st.stream_range(c, automation_type, after=None, n=n, newest=True)
        )

    async def stream_len(self, automation_type: str) -> int:
        return await self._db.read(lambda c: st.stream_len(c, automation_type))

    # ------------------------------------------------------------ events
    async def publish(self, topic: str, message: Any) -> None:
        await self._db.write(lambda c: st.publish(c, topic, message, now()))
        self._watcher.kick()

    async def subscribe(self, *topics: str) -> SQLiteSubscription:
        return await self._watcher.subscribe(frozenset(topics))

    # ------------------------------------------------------------ pools
    async def pool_put(
        self,
        name: str,
        payload: Any,
        tags: dict[str, Any],
        *,
        ttl_seconds: float | None = None,
        item_id: str | None = None,
    ) -> str:
        return await self._db.write(
            lambda c: pools.put(
                c, name, payload, tags, ttl_seconds=ttl_seconds, item_id=item_id, now=now()
            )
        )

    async def pool_claim(
        self,
        name: str,
        *,
        where: dict[str, Any] | None = None,
        hold_seconds: float = 60.0,
        strategy: PoolStrategy = "freshest",
    ) -> PoolClaim | None:
        return await self._db.write(
            lambda c: pools.claim(
                c, name, where=where, hold_seconds=hold_seconds, strategy=strategy, now=now()
            )
        )

    async def pool_release(self, name: str, item_id: str, token: str) -> bool:
        return await self._db.write(lambda c: pools.release(c, name, item_id, token, now()))

    async def pool_evict(self, name: str, item_id: str, token: str) -> bool:
        return await self._db.write(lambda c: pools.evict(c, name, item_id, token, now()))

    async def pool_extend(self, name: str, item_id: str, token: str, hold_seconds: float) -> bool:
        return await self._db.write(
            lambda c: pools.extend(c, name, item_id, token, hold_seconds, now())
        )

    async def pool_list(
        self, name: str, *, where: dict[str, Any] | None = None, n: int = 50
    ) -> list[PoolItem]:
        return await self._db.read(lambda c: pools.list_items(c, name, where, n, now()))

    async def pool_size(self, name: str, *, where: dict[str, Any] | None = None) -> int:
        return await self._db.read(lambda c: pools.size(c, name, where, now()))

    async def pool_remove(self, name: str, item_id: str) -> bool:
        return await self._db.write(lambda c: pools.remove(c, name, item_id))

    async def pool_prune(self, name: str) -> int:
        return await self._db.write(lambda c: pools.prune_all(c, name, now()))

    async def pool_names(self) -> list[str]:
        return await self._db.read(pools.names)

    async def pool_stats(self, name: str) -> PoolStats:
        return await self._db.read(lambda c: pools.stats(c, name, now()))

    async def pool_drop(self, name: str) -> int:
        return await self._db.write(lambda c: pools.drop(c, name))


def _on_groups(conn: sqlite3.Connection, automation_type: str, act: Callable[[Book], T]) -> T:
    """Run ``act`` on the type's groups; what it made deliverable bumps the signal."""
    book = Book(conn, automation_type, now())
    out = act(book)
    if book.wake:
        q.signal(conn, automation_type, book.wake)
    return out


def _dupes(pushed: q.Pushed) -> int:
    return sum(1 for r in pushed.results if not r.queued)
