"""Work that ends with its client: a long answer (``?wait=``) is cancelled the
moment the client disconnects, so nothing goes on for nobody."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response

T = TypeVar("T")

#: What a request whose client left answers (nobody reads it; the access log shows it).
GONE_STATUS = 499


class ClientGone(Exception):
    """The client disconnected before its answer was ready (the app answers
    :func:`gone`, which nobody receives)."""


async def gone(request: Request, exc: Exception) -> Response:
    """The answer to :class:`ClientGone` (an exception handler of the app)."""
    return Response(status_code=GONE_STATUS)


async def client_gone(request: Request) -> None:
    """Return once the client has disconnected. Reads the request's ASGI messages:
    for a request whose body was read (or that has none) the next message is the
    disconnect."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def unless_disconnected(request: Request, work: Coroutine[Any, Any, T]) -> T:
    """``work``'s result; if the client disconnects first, ``work`` is cancelled at once.

    Raises:
        ClientGone: The client disconnected first.
    """
    task: asyncio.Task[T] = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(client_gone(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    if task.done() and not task.cancelled():
        return task.result()
    await asyncio.gather(task, return_exceptions=True)
    raise ClientGone("the client disconnected")
