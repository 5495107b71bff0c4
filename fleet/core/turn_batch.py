"""Calls made in one turn of the event loop, sent as one.

Slots that resume together (their replies came in one read) call together: a hundred
``ctx.submit`` or ``ctx.emit`` in the same turn. :class:`TurnBatch` gathers such calls
by key and sends each key's calls at the end of the turn with one call of ``send``;
each caller gets its own answer, and a ``send`` that raises fails every call it
carried. A caller alone in its turn waits for nothing more than that turn's end.
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


class TurnBatch(Generic[K, I, R]):
    """Gathers the calls of one loop turn by key.

    Args:
        send: Sends the items of one key, in call order; returns one answer per item
            (in order). Runs as a task of its own, after the turn.
        limit: Most items per ``send`` (a busier turn sends several batches, in order).
    """

    def __init__(self, send: Callable[[K, list[I]], Awaitable[Sequence[R]]], limit: int) -> None:
        self._send = send
        self._limit = limit
        self._open: dict[K, list[tuple[I, asyncio.Future[R]]]] = {}

    async def add(self, key: K, item: I) -> R:
        """``item``'s answer, once its batch was sent.

        Raises:
            Exception: What the batch's ``send`` raised.
        """
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[R] = loop.create_future()
        batch = self._open.get(key)
        if batch is None or len(batch) >= self._limit:
            batch = self._open[key] = []
            loop.call_soon(self._close, key, batch)
        batch.append((item, answer))
        return await answer

    def _close(self, key: K, batch: list[tuple[I, asyncio.Future[R]]]) -> None:
        if self._open.get(key) is batch:
            del self._open[key]
        task = asyncio.get_running_loop().create_task(self._deliver(key, batch))
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
        for (_, answer), result in zip(batch, answers, strict=True):
            if not answer.done():
                answer.set_result(result)
