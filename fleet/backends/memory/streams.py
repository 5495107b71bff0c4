"""Output streams of the memory backend (``backend.streams``): the store's bounded
streams, the emitting task's record and the emit/progress topics, in one step."""

from __future__ import annotations

import asyncio
from typing import Any

from fleet.backends.memory.store import MemoryStore
from fleet.core.capabilities import Streams
from fleet.core.capabilities.streams import STREAM_MAX_AGE, STREAM_MAX_LEN
from fleet.core.records import StreamEntry, dumps, now
from fleet.core.results import json_size, output_record, progress_record, progress_topic
from fleet.protocol import emit_topic


class MemoryStreams(Streams):
    """One :class:`~fleet.backends.memory.stream.MemoryStream` per type."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    async def push(
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
        entry = self._store.stream(automation_type).push(
            payload,
            worker_id=worker_id,
            now=now(),
            max_len=max_len,
            max_age=max_age,
            task_id=task_id,
            attempt=attempt,
        )
        if task_id is not None:
            size = json_size(dumps(entry.payload))
            output = output_record(entry.id, entry.ts, attempt, entry.payload, size)
            self._store.queue(automation_type).state.record_output(task_id, output, entry.ts)
        self._store.hub.publish(emit_topic(automation_type), entry.to_dict())
        return entry

    async def progress(
        self,
        automation_type: str,
        task_id: str,
        *,
        attempt: int,
        fraction: float | None,
        message: str | None,
    ) -> None:
        t = now()
        progress = progress_record(fraction, message, attempt, t)
        self._store.queue(automation_type).state.record_progress(task_id, progress, t)
        self._store.hub.publish(progress_topic(automation_type), {"task_id": task_id, **progress})

    async def pop(self, automation_type: str, n: int = 1) -> list[StreamEntry]:
        await asyncio.sleep(0)
        return self._store.stream(automation_type).pop(n)

    async def peek(self, automation_type: str, n: int = 10) -> list[StreamEntry]:
        return self._store.stream(automation_type).peek(n)

    async def read(
        self, automation_type: str, *, after: str | None = None, n: int = 100
    ) -> list[StreamEntry]:
        return self._store.stream(automation_type).read(after, n)

    async def tail(self, automation_type: str, n: int = 20) -> list[StreamEntry]:
        return self._store.stream(automation_type).tail(n)

    async def length(self, automation_type: str) -> int:
        return len(self._store.stream(automation_type))
