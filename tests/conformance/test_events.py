"""Conformance of the Events capability: publish, subscribe, subscriptions."""

from __future__ import annotations

import asyncio

from fleet.backends.base import Backend
from tests.support.waits import until

# ------------------------------------------------------------ events


async def test_subscribe_then_publish_delivers(backend: Backend) -> None:
    sub = await backend.events.subscribe("t1")
    try:
        await backend.events.publish("t1", {"a": [1, 2]})
        await backend.events.publish("t1", "second")
        assert await asyncio.wait_for(sub.__anext__(), 15) == ("t1", {"a": [1, 2]})
        assert await asyncio.wait_for(sub.__anext__(), 15) == ("t1", "second")
    finally:
        await sub.aclose()


async def test_subscribe_multiple_topics(backend: Backend) -> None:
    sub = await backend.events.subscribe("a", "b")
    try:
        await backend.events.publish("c", 0)
        await backend.events.publish("a", 1)
        await backend.events.publish("b", 2)
        got = [await asyncio.wait_for(sub.__anext__(), 15) for _ in range(2)]
        assert sorted(got) == [("a", 1), ("b", 2)]
    finally:
        await sub.aclose()


async def test_message_published_before_subscribe_is_not_seen(backend: Backend) -> None:
    await backend.events.publish("t", "early")
    sub = await backend.events.subscribe("t")
    try:
        await backend.events.publish("t", "late")
        assert await asyncio.wait_for(sub.__anext__(), 15) == ("t", "late")
    finally:
        await sub.aclose()


async def test_every_subscriber_gets_each_message(backend: Backend) -> None:
    subs = [await backend.events.subscribe("fan") for _ in range(3)]
    try:
        await backend.events.publish("fan", {"n": 1})
        for sub in subs:
            assert await asyncio.wait_for(sub.__anext__(), 15) == ("fan", {"n": 1})
    finally:
        for sub in subs:
            await sub.aclose()


async def test_aclose_ends_iteration(backend: Backend) -> None:
    sub = await backend.events.subscribe("t")
    received: list[object] = []

    async def consume() -> None:
        async for _topic, message in sub:
            received.append(message)

    consumer = asyncio.create_task(consume())
    await backend.events.publish("t", 1)
    await until(lambda: received, what="the published message")
    await sub.aclose()
    await asyncio.wait_for(consumer, 15)
    assert received == [1]
    await backend.events.publish("t", 2)  # no subscriber left: fine


async def test_subscription_as_context_manager(backend: Backend) -> None:
    async with await backend.events.subscribe("ctx") as sub:
        await backend.events.publish("ctx", True)
        assert await asyncio.wait_for(sub.__anext__(), 15) == ("ctx", True)
