"""Conformance: kv, locks, counters, events and the catalog."""

from __future__ import annotations

import asyncio

from fleet.backends.base import Backend

# ------------------------------------------------------------ kv


async def test_kv_set_get_delete(backend: Backend) -> None:
    assert await backend.kv_get("ns", "k") is None
    await backend.kv_set("ns", "k", '{"a":1}')
    assert await backend.kv_get("ns", "k") == '{"a":1}'
    await backend.kv_set("ns", "k", "v2")
    assert await backend.kv_get("ns", "k") == "v2"
    assert await backend.kv_get("other-ns", "k") is None
    assert await backend.kv_delete("ns", "k")
    assert not await backend.kv_delete("ns", "k")
    assert await backend.kv_get("ns", "k") is None


async def test_kv_namespaces_do_not_collide(backend: Backend) -> None:
    await backend.kv_set("a", "b:c", "1")
    await backend.kv_set("a:b", "c", "2")
    assert await backend.kv_get("a", "b:c") == "1"
    assert await backend.kv_get("a:b", "c") == "2"


async def test_kv_ttl(backend: Backend) -> None:
    await backend.kv_set("ns", "k", "v", ttl_seconds=0.4)
    assert await backend.kv_get("ns", "k") == "v"
    await asyncio.sleep(0.5)
    assert await backend.kv_get("ns", "k") is None
    assert not await backend.kv_delete("ns", "k")


async def test_kv_set_replaces_ttl(backend: Backend) -> None:
    await backend.kv_set("ns", "k", "v", ttl_seconds=0.2)
    await backend.kv_set("ns", "k", "v2")
    await asyncio.sleep(0.3)
    assert await backend.kv_get("ns", "k") == "v2"


async def test_kv_setnx(backend: Backend) -> None:
    assert await backend.kv_setnx("ns", "k", "first")
    assert not await backend.kv_setnx("ns", "k", "second")
    assert await backend.kv_get("ns", "k") == "first"


async def test_kv_setnx_after_expiry(backend: Backend) -> None:
    assert await backend.kv_setnx("ns", "k", "first", ttl_seconds=0.2)
    await asyncio.sleep(0.3)
    assert await backend.kv_setnx("ns", "k", "second")
    assert await backend.kv_get("ns", "k") == "second"


async def test_kv_concurrent_setnx_exactly_one_wins(backend: Backend) -> None:
    results = await asyncio.gather(*(backend.kv_setnx("ns", "race", str(i)) for i in range(20)))
    assert results.count(True) == 1
    winner = results.index(True)
    assert await backend.kv_get("ns", "race") == str(winner)


# ------------------------------------------------------------ locks


async def test_lock_acquire_release_token_semantics(backend: Backend) -> None:
    assert await backend.lock_acquire("L", "t1", 10)
    assert not await backend.lock_acquire("L", "t2", 10)
    assert not await backend.lock_acquire("L", "t1", 10)  # not re-entrant
    assert not await backend.lock_release("L", "t2")
    assert await backend.lock_release("L", "t1")
    assert not await backend.lock_release("L", "t1")
    assert await backend.lock_acquire("L", "t2", 10)


async def test_lock_expires(backend: Backend) -> None:
    assert await backend.lock_acquire("L", "t1", 0.2)
    await asyncio.sleep(0.3)
    assert await backend.lock_acquire("L", "t2", 10)
    # The expired holder can neither renew nor release the new holder's lock.
    assert not await backend.lock_renew("L", "t1", 10)
    assert not await backend.lock_release("L", "t1")
    assert await backend.lock_release("L", "t2")


async def test_lock_renew(backend: Backend) -> None:
    assert await backend.lock_acquire("L", "t1", 0.4)
    assert await backend.lock_renew("L", "t1", 2)
    assert not await backend.lock_renew("L", "t2", 2)
    await asyncio.sleep(0.5)
    assert not await backend.lock_acquire("L", "t2", 10)
    assert not await backend.lock_renew("free-lock", "t1", 2)


async def test_lock_concurrent_acquire_one_winner(backend: Backend) -> None:
    results = await asyncio.gather(*(backend.lock_acquire("L", f"t{i}", 5) for i in range(10)))
    assert results.count(True) == 1


# ------------------------------------------------------------ counters


async def test_counters(backend: Backend) -> None:
    assert await backend.counter_get("c") == 0
    assert await backend.counter_incr("c") == 1
    assert await backend.counter_incr("c", 5) == 6
    assert await backend.counter_incr("c", -10) == -4
    assert await backend.counter_get("c") == -4
    await backend.counter_set("c", 42)
    assert await backend.counter_get("c") == 42
    await backend.counter_delete("c")
    assert await backend.counter_get("c") == 0
    assert await backend.counter_incr("absent", -1) == -1


async def test_counter_concurrent_increments(backend: Backend) -> None:
    await asyncio.gather(*(backend.counter_incr("c", 2) for _ in range(50)))
    assert await backend.counter_get("c") == 100


# ------------------------------------------------------------ events


async def test_subscribe_then_publish_delivers(backend: Backend) -> None:
    sub = await backend.subscribe("t1")
    try:
        await backend.publish("t1", {"a": [1, 2]})
        await backend.publish("t1", "second")
        assert await asyncio.wait_for(sub.__anext__(), 15) == ("t1", {"a": [1, 2]})
        assert await asyncio.wait_for(sub.__anext__(), 15) == ("t1", "second")
    finally:
        await sub.aclose()


async def test_subscribe_multiple_topics(backend: Backend) -> None:
    sub = await backend.subscribe("a", "b")
    try:
        await backend.publish("c", 0)
        await backend.publish("a", 1)
        await backend.publish("b", 2)
        got = [await asyncio.wait_for(sub.__anext__(), 15) for _ in range(2)]
        assert sorted(got) == [("a", 1), ("b", 2)]
    finally:
        await sub.aclose()


async def test_message_published_before_subscribe_is_not_seen(backend: Backend) -> None:
    await backend.publish("t", "early")
    sub = await backend.subscribe("t")
    try:
        await backend.publish("t", "late")
        assert await asyncio.wait_for(sub.__anext__(), 15) == ("t", "late")
    finally:
        await sub.aclose()


async def test_every_subscriber_gets_each_message(backend: Backend) -> None:
    subs = [await backend.subscribe("fan") for _ in range(3)]
    try:
        await backend.publish("fan", {"n": 1})
        for sub in subs:
            assert await asyncio.wait_for(sub.__anext__(), 15) == ("fan", {"n": 1})
    finally:
        for sub in subs:
            await sub.aclose()


async def test_aclose_ends_iteration(backend: Backend) -> None:
    sub = await backend.subscribe("t")
    received: list[object] = []

    async def consume() -> None:
        async for _topic, message in sub:
            received.append(message)

    consumer = asyncio.create_task(consume())
    await backend.publish("t", 1)
    for _ in range(100):
        if received:
            break
        await asyncio.sleep(0.01)
    await sub.aclose()
    await asyncio.wait_for(consumer, 15)
    assert received == [1]
    await backend.publish("t", 2)  # no subscriber left: fine


async def test_subscription_as_context_manager(backend: Backend) -> None:
    async with await backend.subscribe("ctx") as sub:
        await backend.publish("ctx", True)
        assert await asyncio.wait_for(sub.__anext__(), 15) == ("ctx", True)


# ------------------------------------------------------------ catalog


async def test_catalog(backend: Backend) -> None:
    assert await backend.catalog_get("t") is None
    assert await backend.catalog_all() == {}
    entry = {"config": {"type": "object"}, "output": None, "task_payload": {"x": [1]}}
    await backend.catalog_put("t", entry)
    await backend.catalog_put("u", {"config": {}})
    assert await backend.catalog_get("t") == entry
    assert await backend.catalog_all() == {"t": entry, "u": {"config": {}}}
    await backend.catalog_put("u", {"config": {"v": 2}})
    assert await backend.catalog_get("u") == {"config": {"v": 2}}
    await backend.catalog_delete("t")
    assert await backend.catalog_get("t") is None
    assert list(await backend.catalog_all()) == ["u"]


async def test_ping(backend: Backend) -> None:
    assert await backend.ping() is True


async def test_returned_values_are_copies(backend: Backend) -> None:
    await backend.catalog_put("t", {"list": [1]})
    got = await backend.catalog_get("t")
    assert got is not None
    got["list"].append(2)
    assert await backend.catalog_get("t") == {"list": [1]}
