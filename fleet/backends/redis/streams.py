"""Output streams and the event bus of the Redis backend.

A stream is the zset ``stream:<type>`` (score = emit time, member = JSON
envelope ``{id, ts, worker_id, payload}``); every push trims it by age and by
count in the same script and publishes the envelope on ``event:<type>.emit``.
Events are plain Redis pub/sub on ``event:<topic>`` channels in database 0 and
``event:db<N>:<topic>`` in database N (pub/sub ignores the database, so the
channel names keep fleets on two databases of one server apart; see
:func:`fleet.backends.redis.keys.event_prefix`).
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from typing import Any

from fleet.backends.base import STREAM_MAX_AGE, STREAM_MAX_LEN, Subscription
from fleet.backends.redis import keys
from fleet.backends.redis.core import COMMAND_TIMEOUT, CONNECT_TIMEOUT, RedisCore
from fleet.core.errors import BackendUnavailable
from fleet.core.records import StreamEntry, dumps, now, stream_entry_id
from fleet.core.results import (
    RECORD_MAX_OUTPUTS,
    progress_record,
    progress_topic,
    record_lifetime,
)
from fleet.protocol import emit_topic

#: How far before a cursor's own timestamp ``stream_read`` starts looking (the
#: zset score and the id's microseconds may round differently).
CURSOR_SLACK = 0.001


def cursor_score(after: str) -> str:
    """The lowest zset score an entry newer than cursor ``after`` can have."""
    head = after.split("-", 1)[0]
    try:
        micros = int(head, 16)
    except ValueError:
        return "-inf"
    return repr(micros / 1_000_000 - CURSOR_SLACK)


class RedisSubscription(Subscription):
    """Iterates ``(topic, message)`` from one dedicated pub/sub connection.

    Args:
        pubsub: The redis-py pub/sub object (its own connection).
        core: The backend (error translation).
        prefix: The channel prefix of the backend's database, cut off every
            channel name to give the topic back.
    """

    def __init__(self, pubsub: Any, core: RedisCore, prefix: str = keys.EVENT_PREFIX) -> None:
        self._pubsub = pubsub
        self._core = core
        self._prefix = prefix
        self._early: deque[tuple[str, Any]] = deque()
        self._closed = False
        self._reader: asyncio.Future[Any] | None = None

    async def _confirm(self, channels: list[str]) -> None:
        """Subscribe and wait for every confirmation (messages arriving in between
        are kept for the iterator)."""
        pending = set(channels)
        if not pending:
            return  # no topic: the iteration just waits for aclose()
        await self._pubsub.subscribe(*channels)
        loop = asyncio.get_running_loop()
        give_up = loop.time() + COMMAND_TIMEOUT + CONNECT_TIMEOUT
        while pending:
            left = give_up - loop.time()
            if left <= 0:
                raise BackendUnavailable("redis did not confirm the subscription in time")
            msg = await self._pubsub.get_message(timeout=left)
            if msg is None:
                continue
            if msg["type"] == "subscribe":
                pending.discard(msg["channel"])
            elif msg["type"] == "message":
                self._early.append(self._decode(msg))

    def _decode(self, msg: dict[str, Any]) -> tuple[str, Any]:
        channel: str = msg["channel"]
        topic = channel[len(self._prefix) :]
        try:
            data = json.loads(msg["data"])
        except (TypeError, ValueError):
            data = msg["data"]
        return topic, data

    async def __anext__(self) -> tuple[str, Any]:
        while True:
            if self._closed:
                raise StopAsyncIteration
            if self._early:
                return self._early.popleft()
            # The read runs as its own task so aclose() from another task can
            # cancel it and end this iteration.
            if self._pubsub.subscribed:
                read = self._pubsub.get_message(ignore_subscribe_messages=True, timeout=None)
            else:
                read = asyncio.get_running_loop().create_future()  # until aclose()
            self._reader = asyncio.ensure_future(read)
            try:
                with self._core._guard():
                    msg = await self._reader
            except asyncio.CancelledError:
                me = asyncio.current_task()
                if self._closed and (me is None or me.cancelling() == 0):
                    raise StopAsyncIteration from None
                raise
            finally:
                self._reader = None
            if msg is not None and msg.get("type") == "message":
                return self._decode(msg)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._reader is not None:
            self._reader.cancel()
        try:
            await self._pubsub.aclose()
        except Exception:
            pass


class StreamOps(RedisCore):
    """Stream and event methods of the Redis backend."""

    def _channel(self, topic: str) -> str:
        """The pub/sub channel of ``topic`` in this backend's database."""
        return keys.event_channel(topic, self._endpoint.db)

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
        t = now()
        entry = StreamEntry(
            id=stream_entry_id(t),
            ts=t,
            worker_id=worker_id,
            payload=payload,
            task_id=task_id,
            attempt=attempt,
        )
        argv = [
            repr(t),
            entry.to_json(),
            repr(t - max_age),
            max(0, int(max_len)),
            self._channel(emit_topic(automation_type)),
        ]
        stream_keys = [keys.stream(automation_type)]
        if task_id is not None:
            record = keys.task_record(automation_type, task_id)
            stream_keys += [record, record + ":out"]
            argv += [record_lifetime(), RECORD_MAX_OUTPUTS]
        with self._guard():
            await self._scripts.stream_push(self._lane, stream_keys, argv)
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
        progress = progress_record(fraction, message, attempt, now())
        record = keys.task_record(automation_type, task_id)
        event = dumps({"task_id": task_id, **progress})
        channel = self._channel(progress_topic(automation_type))
        argv = [dumps(progress), record_lifetime(), channel, event]
        with self._guard():
            await self._scripts.task_progress(self._lane, [record], argv)

    async def stream_pop(self, automation_type: str, n: int = 1) -> list[StreamEntry]:
        if n <= 0:
            return []
        with self._guard():
            raw = await self._r.zpopmin(keys.stream(automation_type), n)
        return [StreamEntry.from_json(member) for member, _score in raw]

    async def stream_peek(self, automation_type: str, n: int = 10) -> list[StreamEntry]:
        if n <= 0:
            return []
        with self._guard():
            raw = await self._r.zrange(keys.stream(automation_type), 0, n - 1)
        return [StreamEntry.from_json(m) for m in raw]

    async def stream_read(
        self, automation_type: str, *, after: str | None = None, n: int = 100
    ) -> list[StreamEntry]:
        if n <= 0:
            return []
        low = "-inf" if after is None else cursor_score(after)
        argv = [low, after or "", n]
        with self._guard():
            raw = await self._scripts.stream_read(self._lane, [keys.stream(automation_type)], argv)
        return [StreamEntry.from_json(m) for m in raw]

    async def stream_tail(self, automation_type: str, n: int = 20) -> list[StreamEntry]:
        if n <= 0:
            return []
        with self._guard():
            raw = await self._r.zrange(keys.stream(automation_type), -n, -1)
        return [StreamEntry.from_json(m) for m in raw]

    async def stream_len(self, automation_type: str) -> int:
        with self._guard():
            return int(await self._r.zcard(keys.stream(automation_type)))

    # ------------------------------------------------------------ events
    async def publish(self, topic: str, message: Any) -> None:
        data = dumps(message)
        with self._guard():
            await self._lane.execute("PUBLISH", self._channel(topic), data)

    async def subscribe(self, *topics: str) -> Subscription:
        pubsub = self._b.pubsub()
        sub = RedisSubscription(pubsub, self, keys.event_prefix(self._endpoint.db))
        try:
            with self._guard():
                await sub._confirm([self._channel(t) for t in topics])
        except BaseException:
            await sub.aclose()
            raise
        self._subs.add(sub)
        return sub
