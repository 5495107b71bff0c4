"""Events: fire-and-forget pub/sub between workers, masters and viewers."""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator
from typing import Any


class Subscription(abc.ABC):
    """A live subscription to event topics; iterate it for ``(topic, message)``.

    Messages published before the subscription was established are not seen.
    ``aclose`` ends the iteration and frees the backend's resources.
    """

    def __aiter__(self) -> AsyncIterator[tuple[str, Any]]:
        return self

    @abc.abstractmethod
    async def __anext__(self) -> tuple[str, Any]: ...

    @abc.abstractmethod
    async def aclose(self) -> None: ...

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class Events(abc.ABC):
    """Publish JSON messages on topics; subscribe to them."""

    @abc.abstractmethod
    async def publish(self, topic: str, message: Any) -> None:
        """Fire-and-forget: deliver a JSON message to every current subscriber of
        ``topic`` (Redis channel ``event:<topic>``). No persistence."""

    @abc.abstractmethod
    async def subscribe(self, *topics: str) -> Subscription:
        """Start listening to ``topics``; returns once the subscription is live, so
        anything published after this call returns is delivered."""
