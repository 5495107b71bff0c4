"""Events of the memory backend (``backend.events``): an in-process bus, one fan-out
queue per subscription."""

from __future__ import annotations

import asyncio
import json
import weakref
from collections import deque
from typing import Any

from fleet.backends.memory.wait import resolve
from fleet.core.capabilities import Events, Subscription
from fleet.core.errors import ContractValueError
from fleet.core.records import dumps

#: A subscriber that falls this far behind loses its oldest messages (as a slow
#: Redis pub/sub client would be cut off), so a stuck reader cannot eat memory.
MAX_BACKLOG = 10_000


class MemoryEventBus:
    """Topic -> live subscriptions of one memory store."""

    def __init__(self) -> None:
        self.topics: dict[str, set[MemorySubscription]] = {}

    def publish(self, topic: str, message: Any) -> None:
        """Deliver a JSON copy of ``message`` to every subscriber of ``topic``."""
        raw = dumps(message)  # also refuses what could not cross a real bus
        for sub in list(self.topics.get(topic, ())):
            sub.deliver(topic, json.loads(raw))

    def subscribe(self, topics: tuple[str, ...]) -> MemorySubscription:
        sub = MemorySubscription(self, topics)
        for topic in topics:
            self.topics.setdefault(topic, set()).add(sub)
        return sub

    def unsubscribe(self, sub: MemorySubscription) -> None:
        for topic in sub.topics:
            subs = self.topics.get(topic)
            if subs is not None:
                subs.discard(sub)
                if not subs:
                    del self.topics[topic]


class MemorySubscription(Subscription):
    """A subscription's own queue of ``(topic, message)``."""

    def __init__(self, hub: MemoryEventBus, topics: tuple[str, ...]) -> None:
        self._hub = hub
        self.topics = topics
        self._backlog: deque[tuple[str, Any]] = deque(maxlen=MAX_BACKLOG)
        self._waiter: asyncio.Future[None] | None = None
        self.closed = False

    def deliver(self, topic: str, message: Any) -> None:
        self._backlog.append((topic, message))
        if self._waiter is not None:
            resolve(self._waiter)

    async def __anext__(self) -> tuple[str, Any]:
        while True:
            if self._backlog:
                return self._backlog.popleft()
            if self.closed:
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        """End the iteration (pending messages are dropped) and leave the hub."""
        if self.closed:
            return
        self.closed = True
        self._backlog.clear()
        self._hub.unsubscribe(self)
        if self._waiter is not None:
            resolve(self._waiter)


class MemoryEvents(Events):
    """Publish and subscribe on the store's bus; the subscriptions of this backend
    instance end when it closes."""

    def __init__(self, hub: MemoryEventBus) -> None:
        self._hub = hub
        # Weak: a subscription closed by its user must not be kept alive here.
        self._subs: weakref.WeakSet[MemorySubscription] = weakref.WeakSet()

    async def publish(self, topic: str, message: Any) -> None:
        self._hub.publish(topic, message)

    async def subscribe(self, *topics: str) -> Subscription:
        if not topics:
            raise ContractValueError("subscribe needs at least one topic", field="topics")
        sub = self._hub.subscribe(tuple(topics))
        self._subs.add(sub)
        return sub

    def close(self) -> None:
        """End every subscription made through this object."""
        for sub in list(self._subs):
            sub.close()
        self._subs.clear()
