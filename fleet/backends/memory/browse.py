"""Browse on the memory backend: pages walk the type's live tasks (or its DLQ) and
keep the ``limit + 1`` newest before the cursor (``heapq.nlargest``: O(N log k)).
Each call runs without awaiting in the middle, so it is one atomic step."""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Sequence

from fleet.backends.memory.queue import QueueState, _Task
from fleet.backends.memory.store import MemoryStore
from fleet.core.capabilities.browse import (
    Browse,
    BrowseState,
    DeadSelection,
    TaskPage,
    TaskSummary,
    before,
    check_page_args,
    decode_cursor,
    page_of,
)
from fleet.core.records import TaskBody

#: The live state behind each page state.
_LIVE = {"pending": "queued", "scheduled": "scheduled", "processing": "processing"}


def _order(b: TaskBody) -> tuple[float, str]:
    return (b.enqueued_at, b.id)


def _live(t: _Task, state: BrowseState) -> TaskSummary:
    return TaskSummary(
        id=t.body.id,
        state=state,
        priority=t.body.priority,
        group=t.body.group,
        run=t.body.run,
        attempt=t.body.attempt,
        enqueued_at=t.body.enqueued_at,
        ready_at=t.ready_at if state == "scheduled" else None,
        deadline=t.deadline if state == "processing" else None,
        last_error=t.body.last_error,
        failed_at=t.body.failed_at,
    )


class MemoryBrowse(Browse):
    """:class:`~fleet.core.capabilities.browse.Browse` over a :class:`MemoryStore`."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    def _state(self, automation_type: str) -> QueueState:
        return self._store.queue(automation_type).state

    async def page(
        self, automation_type: str, state: BrowseState, limit: int, cursor: str | None
    ) -> TaskPage:
        check_page_args(state, limit)
        pos = None if cursor is None else decode_cursor(cursor)
        await asyncio.sleep(0)  # a yield point, as every networked backend has
        q = self._state(automation_type)
        # Rank first, build the page's records after: only limit + 1 are made.
        if state == "dead":
            bodies = heapq.nlargest(
                limit + 1,
                (b for b in q.dead.values() if before(b.enqueued_at, b.id, pos)),
                key=_order,
            )
            newest = [TaskSummary.of_dead(b) for b in bodies]
        else:
            live = _LIVE[state]
            tasks = heapq.nlargest(
                limit + 1,
                (
                    t
                    for t in q.tasks.values()
                    if t.state == live and before(t.body.enqueued_at, t.body.id, pos)
                ),
                key=lambda t: _order(t.body),
            )
            newest = [_live(t, state) for t in tasks]
        return page_of(newest, limit)

    async def body(self, automation_type: str, task_id: str) -> TaskBody | None:
        await asyncio.sleep(0)
        q = self._state(automation_type)
        if task_id in q.dead:
            return q.dead[task_id]
        t = q.tasks.get(task_id)
        return t.body if t is not None and t.state in _LIVE.values() else None

    async def dead_select(
        self, automation_type: str, task_ids: Sequence[str], *, replay: bool
    ) -> DeadSelection:
        await asyncio.sleep(0)
        q = self._state(automation_type)
        done: list[str] = []
        skipped: list[str] = []
        unknown: list[str] = []
        for tid in dict.fromkeys(task_ids):
            if tid not in q.dead:
                unknown.append(tid)
            elif not replay:
                del q.dead[tid]
                done.append(tid)
            elif q.dead_replay(None, [tid]):
                done.append(tid)
            else:
                skipped.append(tid)  # a live task of the id won (dead_replay's rule)
        return DeadSelection(tuple(done), tuple(skipped), tuple(unknown))
