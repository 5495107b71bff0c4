"""Wake-ups for the memory backend: futures that blocked callers wait on.

Plain futures instead of ``asyncio.Condition`` because a named memory store
outlives any one event loop (tests open the same store from several loops);
each future belongs to the loop that created it and is resolved on that loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque


def _set_if_pending(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def resolve(fut: asyncio.Future[None]) -> bool:
    """Wake the waiter of ``fut`` (on its own loop); False if it was already done."""
    if fut.done():
        return False
    loop = fut.get_loop()
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if loop is running:
        fut.set_result(None)
        return True
    if loop.is_closed() or not loop.is_running():
        return False  # nobody can be waiting on a loop that does not run
    # A waiter of another loop: hand the wake-up to that loop's thread.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(_set_if_pending, fut)
        return True
    return False


class Waiters:
    """A FIFO of blocked callers; ``wake(n)`` releases the ``n`` longest waiting."""

    def __init__(self) -> None:
        self._futs: deque[asyncio.Future[None]] = deque()

    def __len__(self) -> int:
        return len(self._futs)

    def add(self) -> asyncio.Future[None]:
        """A new future for the running loop, queued behind earlier waiters."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._futs.append(fut)
        return fut

    def discard(self, fut: asyncio.Future[None]) -> None:
        with contextlib.suppress(ValueError):
            self._futs.remove(fut)

    def wake(self, n: int = 1) -> None:
        """Wake up to ``n`` waiters (skipping ones already woken or cancelled)."""
        while n > 0 and self._futs:
            if resolve(self._futs.popleft()):
                n -= 1

    def wake_all(self) -> None:
        while self._futs:
            resolve(self._futs.popleft())
