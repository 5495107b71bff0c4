"""Events of the Redis backend (``backend.events``): plain Redis pub/sub on
``event:<topic>`` channels in database 0 and ``event:db<N>:<topic>`` in database N
(pub/sub ignores the database, so the channel names keep fleets on two databases
of one server apart; see :func:`fleet.backends.redis.keys.event_prefix`)."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from typing import Any

from fleet.backends.redis.core import COMMAND_TIMEOUT, CONNECT_TIMEOUT, RedisCore, RedisPart
from fleet.core.capabilities import Events, Subscription
from fleet.core.errors import BackendUnavailable
from fleet.core.records import dumps


class RedisSubscription(Subscription):
    """Iterates ``(topic, message)`` from one dedicated pub/sub connection.

    Args:
        pubsub: The redis-py pub/sub object (its own connection).
        core: The backend (error translation).
        prefix: The channel prefix of the backend's database, cut off every
            channel name to give the topic back.
    """

    def __init__(self, pubsub: Any, core: RedisCore, prefix: str) -> None:
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


class RedisEvents(RedisPart, Events):
    """Publish over the script lane; each subscription on a pub/sub connection of
    its own, closed with the backend."""

    async def publish(self, topic: str, message: Any) -> None:
        data = dumps(message)
        with self._guard():
            await self._lane.execute("PUBLISH", self._channel(topic), data)

    async def subscribe(self, *topics: str) -> Subscription:
        pubsub = self._b.pubsub()
        sub = RedisSubscription(pubsub, self._core, self._keys.event_prefix(self._endpoint.db))
        try:
            with self._guard():
                await sub._confirm([self._channel(t) for t in topics])
        except BaseException:
            await sub.aclose()
            raise
        self._core._subs.add(sub)
        return sub
