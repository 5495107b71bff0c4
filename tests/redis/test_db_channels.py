"""Fleets on two databases of one Redis server stay apart: pub/sub ignores the
database number, so every event channel carries it (``event:<topic>`` on db 0,
``event:db<N>:<topic>`` on db N; docs/redis-schema.md)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from fleet.backends.base import Subscription
from fleet.backends.redis import RedisBackend, keys
from fleet.protocol import emit_topic

T = "dbs-type"
EMIT = emit_topic(T)


def test_channel_names_carry_the_database() -> None:
    assert keys.event_channel("scraper.emit") == "event:scraper.emit"  # the spec's, on db 0
    assert keys.event_channel("scraper.emit", 0) == "event:scraper.emit"
    assert keys.event_channel("scraper.emit", 1) == "event:db1:scraper.emit"
    assert keys.event_channel("config.t", 15) == "event:db15:config.t"
    assert keys.event_prefix(0) == keys.EVENT_PREFIX == "event:"
    assert keys.event_prefix(3) == "event:db3:"


@pytest.fixture
async def dbs(redis_url: str) -> AsyncIterator[tuple[RedisBackend, RedisBackend]]:
    """Backends on db 0 and db 1 of the session server."""
    url1 = redis_url.rsplit("/", 1)[0] + "/1"
    b0, b1 = RedisBackend(redis_url), RedisBackend(url1)
    await b0.connect()
    await b1.connect()
    try:
        yield b0, b1
    finally:
        await b0.close()
        await b1.close()


async def take(sub: Subscription, n: int) -> list[tuple[str, Any]]:
    return [await asyncio.wait_for(sub.__anext__(), 10) for _ in range(n)]


async def nothing_more(sub: Subscription) -> None:
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(sub.__anext__(), 0.3)


async def test_subscribers_of_each_database_see_only_their_own_events(
    redis_url: str, dbs: tuple[RedisBackend, RedisBackend]
) -> None:
    b0, b1 = dbs
    # A raw pattern subscriber sees every channel of the server: once it has all
    # four messages, the server has delivered everything each subscriber will get.
    probe = aioredis.Redis.from_url(redis_url, decode_responses=True)
    raw = probe.pubsub()
    await raw.psubscribe("event:*")
    assert (await raw.get_message(timeout=5))["type"] == "psubscribe"
    sub0 = await b0.events.subscribe("news", EMIT)
    sub1 = await b1.events.subscribe("news", EMIT)
    try:
        await b0.events.publish("news", {"from": 0})
        await b1.events.publish("news", {"from": 1})
        e0 = await b0.streams.push(T, {"from": 0}, worker_id="w0")
        e1 = await b1.streams.push(T, {"from": 1}, worker_id="w1")

        channels: list[str] = []
        while len(channels) < 4:
            msg = await raw.get_message(ignore_subscribe_messages=True, timeout=5)
            assert msg is not None, channels
            channels.append(msg["channel"])
        assert sorted(channels) == sorted(
            ["event:news", "event:db1:news", f"event:{EMIT}", f"event:db1:{EMIT}"]
        )

        got0 = await take(sub0, 2)
        got1 = await take(sub1, 2)
        assert got0 == [("news", {"from": 0}), (EMIT, e0.to_dict())]
        assert got1 == [("news", {"from": 1}), (EMIT, e1.to_dict())]
        await nothing_more(sub0)
        await nothing_more(sub1)
    finally:
        await sub0.aclose()
        await sub1.aclose()
        await raw.aclose()
        await probe.aclose()


async def test_the_same_database_still_hears_itself_across_instances(
    redis_url: str, dbs: tuple[RedisBackend, RedisBackend]
) -> None:
    _, b1 = dbs
    other = RedisBackend(redis_url.rsplit("/", 1)[0] + "/1")
    await other.connect()
    sub = await other.events.subscribe("config.t")
    try:
        await b1.events.publish("config.t", {"gen": 7})
        assert await take(sub, 1) == [("config.t", {"gen": 7})]
    finally:
        await sub.aclose()
        await other.close()
