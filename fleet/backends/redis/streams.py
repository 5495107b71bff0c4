"""Output streams of the Redis backend (``backend.streams``).

A stream is the zset ``stream:<type>`` (score = emit time, member = JSON
envelope ``{id, ts, worker_id, payload}``); every push trims it by age and by
count in the same script and publishes the envelope on ``event:<type>.emit``.
Events are in ``events.py``.
"""

from __future__ import annotations

from typing import Any

from fleet.backends.redis.core import RedisCore, RedisPart
from fleet.core.call_batch import CallBatch
from fleet.core.capabilities import Streams
from fleet.core.capabilities.streams import STREAM_MAX_AGE, STREAM_MAX_LEN
from fleet.core.records import StreamEntry, dumps, now, stream_entry_id
from fleet.core.results import (
    RECORD_MAX_OUTPUTS,
    RECORD_OUTPUT_MAX_BYTES,
    json_size,
    output_record,
    progress_record,
    progress_topic,
    record_lifetime,
)
from fleet.protocol import emit_topic

#: Emits written by one script call at most (more waiting ones take several calls).
EMIT_CHUNK = 200

#: How far before a cursor's own timestamp ``stream_read`` starts looking (the
#: zset score and the id's microseconds may round differently).
CURSOR_SLACK = 0.001


def record_envelope(entry: StreamEntry) -> str:
    """What a task's record keeps of an emit whose envelope is over the record's
    byte cap: the output of :func:`output_record` (a marker if the payload is)."""
    size = json_size(dumps(entry.payload))
    return dumps(output_record(entry.id, entry.ts, entry.attempt, entry.payload, size))


def cursor_score(after: str) -> str:
    """The lowest zset score an entry newer than cursor ``after`` can have."""
    head = after.split("-", 1)[0]
    try:
        micros = int(head, 16)
    except ValueError:
        return "-inf"
    return repr(micros / 1_000_000 - CURSOR_SLACK)


class RedisStreams(RedisPart, Streams):
    """Output streams; an emit is one script call, shared by the emits made while it
    runs (a progress report is one), which also publishes each on its event channel."""

    def __init__(self, core: RedisCore) -> None:
        super().__init__(core)
        #: Emits by (type, max len, max age), batched while one is being written: one
        #: script call per batch of at most EMIT_CHUNK.
        self._emits: CallBatch[tuple[str, int, float], StreamEntry, None] = CallBatch(
            self._write_emits, EMIT_CHUNK
        )

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
        t = now()
        entry = StreamEntry(
            id=stream_entry_id(t),
            ts=t,
            worker_id=worker_id,
            payload=payload,
            task_id=task_id,
            attempt=attempt,
        )
        # Emits of a stream made while one is being written (slots emitting at once)
        # go in one script call after it; each caller returns once its entry is
        # written (or fails with its batch).
        await self._emits.add((automation_type, max(0, int(max_len)), float(max_age)), entry)
        return entry

    async def _write_emits(
        self, key: tuple[str, int, float], entries: list[StreamEntry]
    ) -> list[None]:
        automation_type, max_len, max_age = key
        keys = [self._keys.stream(automation_type)]
        argv: list[Any] = [
            repr(max(e.ts for e in entries) - max_age),
            max_len,
            self._channel(emit_topic(automation_type)),
            record_lifetime(),
            RECORD_MAX_OUTPUTS,
        ]
        for entry in entries:
            index = 0
            envelope = entry.to_json()
            kept = ""  # the record keeps the envelope itself
            if entry.task_id is not None:
                record = self._keys.task_record(automation_type, entry.task_id)
                keys += [record, record + ":out"]
                index = len(keys) - 1
                if json_size(envelope) > RECORD_OUTPUT_MAX_BYTES:
                    kept = record_envelope(entry)
            argv += [repr(entry.ts), envelope, index, kept]
        with self._guard():
            await self._scripts.stream_push(self._lane, keys, argv)
        return [None] * len(entries)

    async def progress(
        self,
        automation_type: str,
        task_id: str,
        *,
        attempt: int,
        fraction: float | None,
        message: str | None,
    ) -> None:
        progress = progress_record(fraction, message, attempt, now())
        record = self._keys.task_record(automation_type, task_id)
        event = dumps({"task_id": task_id, **progress})
        channel = self._channel(progress_topic(automation_type))
        argv = [dumps(progress), record_lifetime(), channel, event]
        with self._guard():
            await self._scripts.task_progress(self._lane, [record], argv)

    async def pop(self, automation_type: str, n: int = 1) -> list[StreamEntry]:
        if n <= 0:
            return []
        with self._guard():
            raw = await self._r.zpopmin(self._keys.stream(automation_type), n)
        return [StreamEntry.from_json(member) for member, _score in raw]

    async def peek(self, automation_type: str, n: int = 10) -> list[StreamEntry]:
        if n <= 0:
            return []
        with self._guard():
            raw = await self._r.zrange(self._keys.stream(automation_type), 0, n - 1)
        return [StreamEntry.from_json(m) for m in raw]

    async def read(
        self, automation_type: str, *, after: str | None = None, n: int = 100
    ) -> list[StreamEntry]:
        if n <= 0:
            return []
        low = "-inf" if after is None else cursor_score(after)
        argv = [low, after or "", n]
        with self._guard():
            raw = await self._scripts.stream_read(
                self._lane, [self._keys.stream(automation_type)], argv
            )
        return [StreamEntry.from_json(m) for m in raw]

    async def tail(self, automation_type: str, n: int = 20) -> list[StreamEntry]:
        if n <= 0:
            return []
        with self._guard():
            raw = await self._r.zrange(self._keys.stream(automation_type), -n, -1)
        return [StreamEntry.from_json(m) for m in raw]

    async def length(self, automation_type: str) -> int:
        with self._guard():
            return int(await self._r.zcard(self._keys.stream(automation_type)))
