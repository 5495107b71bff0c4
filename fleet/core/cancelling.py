"""Stopping a background task for sure.

A single ``task.cancel()`` can be lost: on Python 3.11, ``asyncio.wait_for`` swallows
a cancel that comes just as the call it waits for finishes (CPython gh-86296, fixed
in 3.12), and redis-py's asyncio client uses it on every command. The task then
carries on, say into the ``asyncio.sleep`` of its loop, and whoever awaits it after
``cancel()`` waits for ever: a master that never finished its shutdown was one.
"""

from __future__ import annotations

import asyncio
from typing import TypeVar

T = TypeVar("T")

#: How long to wait for a cancelled task before cancelling it again.
AGAIN_AFTER = 0.1


async def cancel_and_wait(task: asyncio.Task[T], again_after: float = AGAIN_AFTER) -> T | None:
    """Cancel ``task`` and wait until it has ended, cancelling it again every
    ``again_after`` seconds while it runs on.

    Returns:
        The task's result if it finished instead of being cancelled, else None.

    Raises:
        Exception: The one the task ended with, if any (as ``await task`` would).
    """
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=again_after)
    if task.cancelled():
        return None
    return task.result()
