"""Waiting for a condition: the one copy of the polling loop the tests use.

A test that waits for an effect of a background task, another process or a socket
asks :func:`until` (async) or :func:`until_sync` instead of writing its own
polling loop. Time rules (leases, TTLs, cool-downs) are not waited
for: a test of one moves the stopped clock (the ``frozen`` fixture) instead.

The deadline is measured on :func:`time.monotonic`, never on ``fleet.core.clock``, so a
test that froze Fleet's clock still times out.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")

#: How long a wait lasts before it fails, unless the test says otherwise.
TIMEOUT = 10.0
#: How often the condition is asked again.
INTERVAL = 0.02


def _failure(what: str, timeout: float, last: object) -> AssertionError:
    return AssertionError(f"timed out after {timeout} s waiting for {what} (last value: {last!r})")


@overload
async def until(
    predicate: Callable[[], Awaitable[T]],
    *,
    timeout: float = ...,
    interval: float = ...,
    what: str = ...,
    ignoring: tuple[type[BaseException], ...] = ...,
) -> T: ...


@overload
async def until(
    predicate: Callable[[], T],
    *,
    timeout: float = ...,
    interval: float = ...,
    what: str = ...,
    ignoring: tuple[type[BaseException], ...] = ...,
) -> T: ...


async def until(
    predicate: Callable[[], Any],
    *,
    timeout: float = TIMEOUT,
    interval: float = INTERVAL,
    what: str = "the condition",
    ignoring: tuple[type[BaseException], ...] = (),
) -> Any:
    """Ask ``predicate`` (sync or async) until it answers something true; that answer.

    An exception of a type in ``ignoring`` counts as a false answer (a port not yet
    open, a file not yet written); any other ends the wait.

    Raises:
        AssertionError: Naming ``what`` and the last answer, once ``timeout`` seconds
            passed without a true one.
    """
    deadline = time.monotonic() + timeout
    while True:
        value: Any
        try:
            value = predicate()
            if inspect.isawaitable(value):
                value = await value
        except ignoring as exc:
            value = exc
        else:
            if value:
                return value
        if time.monotonic() > deadline:
            raise _failure(what, timeout, value)
        await asyncio.sleep(interval)


def until_sync(
    predicate: Callable[[], T],
    *,
    timeout: float = TIMEOUT,
    interval: float = INTERVAL,
    what: str = "the condition",
    ignoring: tuple[type[BaseException], ...] = (),
) -> T:
    """:func:`until` for code outside an event loop (blocks the thread between asks)."""
    deadline = time.monotonic() + timeout
    while True:
        value: Any
        try:
            value = predicate()
        except ignoring as exc:
            value = exc
        else:
            if value:
                return value  # type: ignore[no-any-return]
        if time.monotonic() > deadline:
            raise _failure(what, timeout, value)
        time.sleep(interval)
