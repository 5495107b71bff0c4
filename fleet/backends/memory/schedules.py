"""The schedules of ``memory://``: records by (type, id) and a heap of due times.

Heap entries are checked against ``due`` when they surface (an entry whose time no
longer matches is stale), so re-indexing a schedule never searches the heap.
"""

from __future__ import annotations

import asyncio
import heapq

from fleet.core.capabilities.schedules import ScheduleStore

Key = tuple[str, str]


class ScheduleTable:
    """Every schedule of one store."""

    def __init__(self) -> None:
        self.records: dict[Key, str] = {}
        self.due: dict[Key, float] = {}
        self._heap: list[tuple[float, Key]] = []

    def put(self, key: Key, raw: str, due: float | None) -> None:
        self.records[key] = raw
        if due is None:
            self.due.pop(key, None)
        else:
            self.due[key] = due
            heapq.heappush(self._heap, (due, key))

    def delete(self, key: Key) -> bool:
        self.due.pop(key, None)
        return self.records.pop(key, None) is not None

    def _clean_top(self) -> None:
        while self._heap:
            due, key = self._heap[0]
            if self.due.get(key) == due:
                return
            heapq.heappop(self._heap)

    def next_due(self) -> float | None:
        self._clean_top()
        return self._heap[0][0] if self._heap else None

    def due_now(self, now: float, limit: int) -> list[Key]:
        self._clean_top()
        # The heap is ordered; walk its smallest entries without popping them.
        out: list[Key] = []
        for due, key in heapq.nsmallest(max(limit, 1) * 2, self._heap):
            if len(out) >= limit or due > now:
                break
            if self.due.get(key) == due and key not in out:
                out.append(key)
        return out

    def purge_type(self, automation_type: str) -> None:
        for key in [k for k in self.records if k[0] == automation_type]:
            self.delete(key)


class MemorySchedules(ScheduleStore):
    """``ScheduleStore`` over the store's :class:`ScheduleTable`."""

    def __init__(self, table: ScheduleTable) -> None:
        self._schedule_table = table

    async def put_raw(
        self, automation_type: str, schedule_id: str, raw: str, due: float | None
    ) -> None:
        await asyncio.sleep(0)
        self._schedule_table.put((automation_type, schedule_id), raw, due)

    async def swap_raw(
        self, automation_type: str, schedule_id: str, expected: str, raw: str, due: float | None
    ) -> bool:
        await asyncio.sleep(0)
        table = self._schedule_table
        key = (automation_type, schedule_id)
        if table.records.get(key) != expected:
            return False
        table.put(key, raw, due)
        return True

    async def get_raw(self, automation_type: str, schedule_id: str) -> str | None:
        await asyncio.sleep(0)
        return self._schedule_table.records.get((automation_type, schedule_id))

    async def listing_raw(self, automation_type: str) -> dict[str, str]:
        await asyncio.sleep(0)
        records = self._schedule_table.records
        return {sid: raw for (t, sid), raw in records.items() if t == automation_type}

    async def delete(self, automation_type: str, schedule_id: str) -> bool:
        await asyncio.sleep(0)
        return self._schedule_table.delete((automation_type, schedule_id))

    async def due_raw(self, now: float, limit: int = 100) -> list[tuple[str, str, str]]:
        await asyncio.sleep(0)
        table = self._schedule_table
        return [(t, sid, table.records[(t, sid)]) for t, sid in table.due_now(now, limit)]

    async def next_due(self) -> float | None:
        await asyncio.sleep(0)
        return self._schedule_table.next_due()
