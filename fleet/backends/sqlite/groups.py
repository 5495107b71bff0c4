"""Task groups of the SQLite backend (``backend.groups``): each operation one
transaction over the type's :class:`~fleet.backends.sqlite.group_book.Book`."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TypeVar

from fleet.backends.sqlite import queue as q
from fleet.backends.sqlite import signals
from fleet.backends.sqlite.conn import SQLiteDB
from fleet.backends.sqlite.group_book import Book
from fleet.backends.sqlite.queues import write_waking
from fleet.backends.sqlite.watch import Watcher
from fleet.core.capabilities import TaskGroups
from fleet.core.capabilities.proxies import ProxyPolicy
from fleet.core.flow import GroupInfo, GroupLimits, GroupPage, GroupSettings
from fleet.core.records import now

T = TypeVar("T")


def _on_groups(conn: sqlite3.Connection, automation_type: str, act: Callable[[Book], T]) -> T:
    """Run ``act`` on the type's groups; what it made deliverable bumps the signal."""
    book = Book(conn, automation_type, now())
    out = act(book)
    if book.wake:
        signals.signal(conn, automation_type, book.wake)
    return out


class SQLiteGroups(TaskGroups):
    """Groups of one database file; a change that frees tasks wakes reservers."""

    def __init__(self, db: SQLiteDB, watcher: Watcher) -> None:
        self._db = db
        self._watcher = watcher

    async def _waking(self, automation_type: str, op: Callable[[sqlite3.Connection], T]) -> T:
        return await write_waking(self._db, self._watcher, automation_type, op)

    async def throttle(
        self, automation_type: str, task_id: str, token: str, *, retry_after: float
    ) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            done = _on_groups(
                conn, automation_type, lambda book: book.throttle(task_id, token, retry_after)
            )
            if done:
                signals.count(conn, automation_type, "throttled")
                row = conn.execute(
                    "SELECT run FROM tasks WHERE type = ? AND id = ?", (automation_type, task_id)
                ).fetchone()
                if row is not None and row[0] is not None:
                    q.run_event(conn, row[0], automation_type, "requeued", now())
            return done

        return await self._waking(automation_type, op)

    async def page(
        self, automation_type: str, *, after: str | None = None, limit: int = 1000
    ) -> GroupPage:
        # A write: listing deletes the rows of groups that hold nothing any more.
        return await self._db.write(lambda c: Book(c, automation_type, now()).page(after, limit))

    async def info(self, automation_type: str, group: str) -> GroupInfo:
        return await self._db.read(lambda c: Book(c, automation_type, now()).info(group))

    async def set(self, automation_type: str, group: str, settings: GroupSettings) -> None:
        await self._waking(
            automation_type,
            lambda c: _on_groups(c, automation_type, lambda book: book.configure(group, settings)),
        )

    async def reset(self, automation_type: str, group: str) -> None:
        await self._waking(
            automation_type,
            lambda c: _on_groups(c, automation_type, lambda book: book.configure(group, None)),
        )

    async def set_defaults(
        self,
        automation_type: str,
        limits: GroupLimits,
        *,
        gen: int,
        proxy: ProxyPolicy | None = None,
    ) -> bool:
        return await self._waking(
            automation_type,
            lambda c: _on_groups(
                c, automation_type, lambda book: book.set_defaults(limits, gen, proxy)
            ),
        )

    async def defaults(self, automation_type: str) -> tuple[GroupLimits, int]:
        return await self._db.read(lambda c: Book(c, automation_type, now()).defaults())
