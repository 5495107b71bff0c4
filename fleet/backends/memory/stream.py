"""One output stream of the memory backend: entries kept sorted by id.

Entries live in a list with a moving head index, so popping the oldest and
trimming are O(1) per entry and a cursor read is a binary search; the list is
compacted once the dead head outgrows the live part.
"""

from __future__ import annotations

import bisect
import json
from typing import Any

from fleet.core.records import StreamEntry, dumps, stream_entry_id


def _copy(entry: StreamEntry) -> StreamEntry:
    return StreamEntry(
        entry.id,
        entry.ts,
        entry.worker_id,
        json.loads(dumps(entry.payload)),
        entry.task_id,
        entry.attempt,
    )


class StreamState:
    """The entries of one stream, oldest first."""

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._entries: list[StreamEntry] = []
        self._head = 0

    def __len__(self) -> int:
        return len(self._ids) - self._head

    def _advance(self, n: int) -> list[StreamEntry]:
        out = self._entries[self._head : self._head + n]
        self._head += len(out)
        if self._head > 1024 and self._head * 2 > len(self._ids):
            del self._ids[: self._head]
            del self._entries[: self._head]
            self._head = 0
        return out

    def push(
        self,
        payload: Any,
        *,
        worker_id: str,
        now: float,
        max_len: int,
        max_age: float,
        task_id: str | None = None,
        attempt: int | None = None,
    ) -> StreamEntry:
        """Append an entry at ``now`` and trim by age and length."""
        entry = StreamEntry(
            stream_entry_id(now), now, worker_id, json.loads(dumps(payload)), task_id, attempt
        )
        if len(self) == 0 or entry.id > self._ids[-1]:
            self._ids.append(entry.id)
            self._entries.append(entry)
        else:  # the clock stepped back: keep the order by id
            at = bisect.bisect_right(self._ids, entry.id, lo=self._head)
            self._ids.insert(at, entry.id)
            self._entries.insert(at, entry)
        horizon = now - max_age
        stale = 0
        while self._head + stale < len(self._entries) and (
            self._entries[self._head + stale].ts < horizon
        ):
            stale += 1
        stale = max(stale, len(self) - max(max_len, 0))
        self._advance(stale)
        return _copy(entry)

    def pop(self, n: int) -> list[StreamEntry]:
        return self._advance(max(n, 0))

    def peek(self, n: int) -> list[StreamEntry]:
        return [_copy(e) for e in self._entries[self._head : self._head + max(n, 0)]]

    def read(self, after: str | None, n: int) -> list[StreamEntry]:
        start = self._head if after is None else bisect.bisect_right(self._ids, after, self._head)
        return [_copy(e) for e in self._entries[start : start + max(n, 0)]]

    def tail(self, n: int) -> list[StreamEntry]:
        start = max(self._head, len(self._entries) - max(n, 0))
        return [_copy(e) for e in self._entries[start:]]
