"""Request body size limits (413), enforced while the body is read; then the JSON
guard (depth, surrogates: 422) on the whole body, before any route parses it.

A ``Content-Length`` above the limit is refused before reading anything; a
body without one (chunked) or one that lies is counted as it arrives and
refused as soon as it passes the limit, so a client cannot make the master
buffer more than the limit by omitting or faking the header.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fleet.master.http.jsonguard import json_problem

#: Decides the limit of one request from its path.
LimitFor = Callable[[str], int]


def limit_for_paths(default: int, batch: int) -> LimitFor:
    """Batch submits and identity creates (up to 1,000 identities with their cookies)
    get ``batch`` bytes, every other request ``default``."""

    def pick(path: str) -> int:
        bulk = path.rstrip("/").endswith("/tasks/batch") or path.startswith("/api/v1/identities/")
        return batch if bulk else default

    return pick


async def _send_422(send: Send, loc: list[str | int], msg: str) -> None:
    detail = [{"type": "value_error", "loc": loc, "msg": msg}]
    body = json.dumps({"detail": detail}).encode()  # ASCII: no surrogate can leak out
    await send(
        {
            "type": "http.response.start",
            "status": 422,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _send_413(send: Send, limit: int) -> None:
    body = json.dumps({"detail": f"request body larger than {limit} bytes"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


#: Bodies larger than this are checked by the JSON guard in a thread.
OFFLOAD_BYTES = 256 << 10

#: Bytes of an oversized body read and thrown away before answering 413, so that
#: ordinary clients still sending get the answer instead of a reset connection.
DRAIN_BYTES = 64 << 20


async def _refuse(receive: Receive, send: Send, limit: int, seen: int, more: bool) -> None:
    # Discard (never buffer) the rest of the body up to DRAIN_BYTES; a client
    # sending more than that gets the answer and a closed connection.
    while more and seen <= DRAIN_BYTES:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        seen += len(message.get("body", b""))
        more = bool(message.get("more_body", False))
    await _send_413(send, limit)


class BodyLimitMiddleware:
    """ASGI middleware buffering each request body up to its limit.

    Args:
        app: The wrapped application.
        limit_for: The byte limit for a request path.
    """

    def __init__(self, app: ASGIApp, limit_for: LimitFor) -> None:
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope.get("path", ""))
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await _refuse(receive, send, limit, 0, True)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _refuse(receive, send, limit, size, bool(message.get("more_body", False)))
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        # A big body is checked off the event loop: other requests keep being served.
        if len(body) > OFFLOAD_BYTES:
            problem = await asyncio.to_thread(json_problem, body)
        else:
            problem = json_problem(body)
        if problem is not None:
            await _send_422(send, *problem)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            # After the body, behave like the server: wait for the disconnect.
            return await receive()

        await self.app(scope, replay, send)


def _content_length(scope: Scope) -> int | None:
    headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
    for name, value in headers:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
