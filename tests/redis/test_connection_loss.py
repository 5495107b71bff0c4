"""When Redis goes away, calls raise BackendUnavailable promptly (never hang, never
leak a driver error); when it comes back, the same backend works again."""

from __future__ import annotations

import asyncio
import time

import pytest

from fleet.backends.redis import RedisBackend
from fleet.core.errors import BackendUnavailable
from fleet.core.records import PushRequest, TaskBody, new_id
from tests.conformance.helpers import blocked
from tests.support.redis_server import REDIS_BIN, RedisServer, free_port

pytestmark = pytest.mark.skipif(REDIS_BIN is None, reason="redis-server not installed")


def req() -> PushRequest:
    return PushRequest(TaskBody(id=new_id(), payload={"a": 1}))


async def test_calls_fail_fast_then_recover(own_server: RedisServer) -> None:
    b = RedisBackend(own_server.url)
    await b.connect()
    try:
        await b.queues.push("t", [req()])
        own_server.stop()
        calls = [
            lambda: b.queues.push("t", [req()]),
            lambda: b.queues.reserve("t", k=5),
            lambda: b.queues.ack("t", [("x", "y")]),
            lambda: b.queues.depths("t"),
            lambda: b.pools.claim("p"),
            lambda: b.kv.get("ns", "k"),
            lambda: b.streams.push("t", 1, worker_id="w"),
            lambda: b.events.publish("topic", 1),
            lambda: b.events.subscribe("topic"),
            lambda: b.workers.get("t", "w"),
        ]
        for call in calls:
            t0 = time.monotonic()
            with pytest.raises(BackendUnavailable):
                await call()
            assert time.monotonic() - t0 < 5.0
        assert await b.ping() is False

        own_server.start()  # same port, empty data, empty script cache
        assert await b.ping() is True
        # Scripts are loaded again on NOSCRIPT, transparently.
        result = await b.queues.push("t", [req()])
        assert result[0].queued
        got = await b.queues.reserve("t", k=1)
        assert len(got) == 1
        assert await b.queues.ack("t", [(got[0].body.id, got[0].token)]) == [True]
    finally:
        await b.close()


async def test_blocked_reserve_fails_when_redis_dies(own_server: RedisServer) -> None:
    b = RedisBackend(own_server.url)
    await b.connect()
    try:
        waiter = asyncio.create_task(b.queues.reserve("t", timeout=30))
        await blocked(b)
        t0 = time.monotonic()
        own_server.stop(kill=True)
        with pytest.raises(BackendUnavailable):
            await asyncio.wait_for(waiter, 10)
        assert time.monotonic() - t0 < 5.0
        own_server.start()
        waiter = asyncio.create_task(b.queues.reserve("t", timeout=20))
        await blocked(b)
        await b.queues.push("t", [req()])
        assert len(await asyncio.wait_for(waiter, 15)) == 1
    finally:
        await b.close()


async def test_subscription_fails_when_redis_dies(own_server: RedisServer) -> None:
    b = RedisBackend(own_server.url)
    await b.connect()
    try:
        sub = await b.events.subscribe("topic")
        own_server.stop()
        with pytest.raises(BackendUnavailable):
            await asyncio.wait_for(sub.__anext__(), 10)
        await sub.aclose()
    finally:
        await b.close()


async def test_unreachable_server_and_password_never_printed() -> None:
    url = f"redis://:s3cret-pw@127.0.0.1:{free_port()}/0"
    b = RedisBackend(url)
    assert "s3cret-pw" not in repr(b)
    t0 = time.monotonic()
    with pytest.raises(BackendUnavailable) as info:
        await b.connect()
    assert time.monotonic() - t0 < 5.0
    assert "s3cret-pw" not in str(info.value)
    assert "***" in str(info.value)
    assert await b.ping() is False
    await b.close()
