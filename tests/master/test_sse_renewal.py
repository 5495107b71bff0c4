"""The event stream renews its subscription when types appear, and says so."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from fleet.backends import open_backend
from fleet.master.services.event_hub import event_stream
from tests.master.conftest import memory_url


async def frames(stream: AsyncIterator[bytes]) -> AsyncIterator[tuple[str, Any]]:
    async for raw in stream:
        head, data = raw.decode().strip().split("\n")
        yield head.removeprefix("event: "), json.loads(data.removeprefix("data: "))


async def next_named(it: AsyncIterator[tuple[str, Any]], name: str) -> Any:
    async def scan() -> Any:
        async for got, data in it:
            if got == name:
                return data
        raise AssertionError("stream ended")

    return await asyncio.wait_for(scan(), 15)


async def test_a_new_type_renews_the_subscription_and_says_hello_again() -> None:
    backend = await open_backend(memory_url())
    stream = event_stream(backend, interval=0.2)
    it = frames(stream)
    try:
        await backend.catalog.put("sse-a", {})
        assert await next_named(it, "hello") == {"types": ["sse-a"]}
        await backend.catalog.put("sse-b", {})
        # Renewed at the next tick: events of the old topics published while the
        # new subscription was set up may be missing, so the client hears hello.
        assert await next_named(it, "hello") == {"types": ["sse-a", "sse-b"]}
        await backend.events.publish("sse-b.emit", {"id": "1"})
        assert await next_named(it, "emit") == {"type": "sse-b", "data": {"id": "1"}}
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
        await backend.close()
