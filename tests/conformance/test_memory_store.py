"""What only the memory backend promises: named stores shared within a process.

Everything else about ``memory://`` is covered by the parametrised conformance
suite; these tests pin the URL-to-store mapping and the waiter lifecycle.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from fleet.backends import open_backend
from fleet.backends.memory.store import drop_store, store_name
from fleet.core.records import PushRequest, TaskBody
from tests.conformance.helpers import blocked


def _url() -> str:
    return f"memory://store-test-{uuid.uuid4().hex[:8]}"


def test_store_name_from_url() -> None:
    assert store_name("memory://") == "default"
    assert store_name("memory://abc") == "abc"
    assert store_name("memory://a/b/") == "a/b"
    assert store_name("memory://abc?x=1") == "abc"


async def test_same_url_shares_one_store() -> None:
    url = _url()
    a = await open_backend(url)
    b = await open_backend(url)
    try:
        await a.queues.push("t", [PushRequest(TaskBody(id="x", payload=1))])
        got = await b.queues.reserve("t", timeout=1)
        assert [r.body.id for r in got] == ["x"]
        assert await a.queues.ack("t", [("x", got[0].token)]) == [True]
    finally:
        await a.close()
        await b.close()
        drop_store(store_name(url))


async def test_different_names_are_independent() -> None:
    a = await open_backend(_url())
    b = await open_backend(_url())
    try:
        await a.kv.set("ns", "k", "v")
        assert await b.kv.get("ns", "k") is None
    finally:
        await a.close()
        await b.close()


async def test_data_outlives_close_until_dropped() -> None:
    url = _url()
    first = await open_backend(url)
    await first.counters.incr("c", 3)
    await first.close()
    second = await open_backend(url)
    assert await second.counters.get("c") == 3
    assert drop_store(store_name(url))
    third = await open_backend(url)
    assert await third.counters.get("c") == 0
    await second.close()
    await third.close()


def test_store_is_usable_from_successive_event_loops() -> None:
    url = _url()

    async def produce() -> None:
        b = await open_backend(url)
        await b.queues.push("t", [PushRequest(TaskBody(id="x", payload=None))])
        await b.close()

    async def consume() -> list[str]:
        b = await open_backend(url)
        got = await b.queues.reserve("t", timeout=1)
        await b.close()
        return [r.body.id for r in got]

    asyncio.run(produce())
    assert asyncio.run(consume()) == ["x"]
    drop_store(store_name(url))


async def test_blocked_reserve_wakes_from_another_backend_instance() -> None:
    url = _url()
    waiter_side = await open_backend(url)
    pusher_side = await open_backend(url)
    try:
        waiting = asyncio.create_task(waiter_side.queues.reserve("t", timeout=10.0))
        await blocked(waiter_side, type_="t")
        t0 = time.monotonic()
        await pusher_side.queues.push("t", [PushRequest(TaskBody(id="x", payload=None))])
        got = await waiting
        assert [r.body.id for r in got] == ["x"]
        assert time.monotonic() - t0 < 5.0
    finally:
        await waiter_side.close()
        await pusher_side.close()


async def test_close_releases_blocked_reserve_and_subscriptions() -> None:
    b = await open_backend(_url())
    waiting = asyncio.create_task(b.queues.reserve("t", timeout=30))
    sub = await b.events.subscribe("topic")
    listening = asyncio.create_task(sub.__anext__())
    await blocked(b, type_="t")
    t0 = time.monotonic()
    await b.close()
    assert await asyncio.wait_for(waiting, 10) == []
    assert time.monotonic() - t0 < 5.0
    ended = await asyncio.gather(listening, return_exceptions=True)
    assert isinstance(ended[0], StopAsyncIteration)
