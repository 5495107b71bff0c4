"""Calls that come while one of their kind is in flight, sent together after it.

Slots that call together (their replies came in one read) would each pay a round
trip: a hundred ``ctx.submit`` or ``ctx.emit`` at once. :class:`CallBatch` sends the
first call of a key at once, in its caller's own task, exactly as without batching;
the calls of the same key that come while it is in flight wait, and go together (at
most ``limit`` per ``send``) when it returns. Each caller gets its own answer; a
``send`` that raises fails every call it carried. A lone caller (one call at a time,
each awaited) never waits and pays nothing; callers of one key are sent in call order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
I = TypeVar("I")  # noqa: E741 - the item of a call
R = TypeVar("R")

#: Sends running now (held so that a running send is never collected).
_SENDING: set[asyncio.Task[None]] = set()


class CallBatch(Generic[K, I, R]):
    """Batches the calls of a key made while one of the key is in flight.

    Args:
        send: Sends the items of one key, in call order; returns one answer per item
            (in order).
        limit: Most items per ``send`` (more waiting calls go as several, in order).
    """

    def __init__(self, send: Callable[[K, list[I]], Awaitable[Sequence[R]]], limit: int) -> None:
        self._send = send
        self._limit = limit
        #: Sends of a key in flight now.
        self._flying: dict[K, int] = {}
        #: Calls of a key waiting for those to return, in batches of at most ``limit``.
        self._waiting: dict[K, list[list[tuple[I, asyncio.Future[R]]]]] = {}

    async def add(self, key: K, item: I) -> R:
        """``item``'s answer, once it was sent (alone, or with the calls that waited
        beside it).

        Raises:
            Exception: What the ``send`` that carried it raised.
        """
        if key not in self._flying:
            self._flying[key] = 1
            try:
                return (await self._send(key, [item]))[0]
            finally:
                self._landed(key)
        answer: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        queue = self._waiting.setdefault(key, [])
        if not queue or len(queue[-1]) >= self._limit:
            queue.append([])
        queue[-1].append((item, answer))
        return await answer

    def _landed(self, key: K) -> None:
        """One send of ``key`` returned: once none flies, the waiting calls go."""
        self._flying[key] -= 1
        if self._flying[key]:
            return
        batches = self._waiting.pop(key, [])
        if not batches:
            del self._flying[key]
            return
        self._flying[key] = len(batches)
        loop = asyncio.get_running_loop()
        for batch in batches:  # tasks start in order: the sends go in call order
            task = loop.create_task(self._deliver(key, batch))
            _SENDING.add(task)
            task.add_done_callback(_SENDING.discard)

    async def _deliver(self, key: K, batch: list[tuple[I, asyncio.Future[R]]]) -> None:
        try:
            answers = await self._send(key, [item for item, _ in batch])
        except BaseException as exc:
            for _, answer in batch:
                if not answer.done():
                    answer.set_exception(exc)
                    answer.exception()  # a cancelled caller must not leave it unretrieved
            if not isinstance(exc, Exception):
                raise
            return
        finally:
            self._landed(key)
        for (_, answer), result in zip(batch, answers, strict=True):
            if not answer.done():
                answer.set_result(result)
