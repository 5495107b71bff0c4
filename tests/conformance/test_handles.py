"""Conformance of the ``ctx.*`` handles (fleet.core.handles) over every backend."""

from __future__ import annotations

import asyncio
import time

import pytest
from pydantic import BaseModel

from fleet.backends.base import Backend
from fleet.core.clock import ManualClock
from fleet.core.contracts import Pool, Stream
from fleet.core.handles import KV, Counter, Events, Lock, PoolHandle, StreamHandle
from tests.support.waits import until

from .helpers import elapse


class Cookie(BaseModel):
    value: str


class CookieTags(BaseModel):
    site: str
    region: str = "eu"


class Other(BaseModel):
    x: int = 0


class Page(BaseModel):
    url: str


COOKIES = Pool("conf-cookies", payload=Cookie, tags=CookieTags)
PAGES = Stream("conf-pages", payload=Page)


# ------------------------------------------------------------ pools


async def test_pool_where_unknown_tag_is_value_error(backend: Backend) -> None:
    pool = PoolHandle(backend.pools, COOKIES)
    with pytest.raises(ValueError, match="nope"):
        pool.where(nope="x")
    pool.where(site="a", region="us")  # known fields are fine


async def test_pool_put_wrong_types_is_type_error(backend: Backend) -> None:
    pool = PoolHandle(backend.pools, COOKIES)
    with pytest.raises(TypeError):
        await pool.put(payload=Other(), tags=CookieTags(site="a"))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await pool.put(payload=Cookie(value="v"), tags=Other())  # type: ignore[arg-type]
    assert await pool.size() == 0


async def test_pool_claim_context_releases_on_exit(backend: Backend) -> None:
    pool = PoolHandle(backend.pools, COOKIES)
    item_id = await pool.put(payload=Cookie(value="v"), tags=CookieTags(site="a"), ttl_seconds=60)
    async with pool.where(site="a").claim(hold_seconds=30) as item:
        assert item is not None
        assert item.id == item_id
        assert item.payload == Cookie(value="v")
        assert item.tags == CookieTags(site="a")
        assert item.expires_at is not None
        assert await pool.size() == 0
        async with pool.claim() as none:
            assert none is None
    assert await pool.size() == 1


async def test_pool_claim_releases_on_error(backend: Backend) -> None:
    pool = PoolHandle(backend.pools, COOKIES)
    await pool.put(payload=Cookie(value="v"), tags=CookieTags(site="a"))
    with pytest.raises(RuntimeError):
        async with pool.claim() as item:
            assert item is not None
            raise RuntimeError("boom")
    assert await pool.size() == 1


async def test_pool_claim_evict_and_extend(backend: Backend, frozen: ManualClock) -> None:
    pool = PoolHandle(backend.pools, COOKIES)
    await pool.put(payload=Cookie(value="burnt"), tags=CookieTags(site="a"))
    async with pool.claim(hold_seconds=0.4) as item:
        assert item is not None
        assert await item.extend(5)
        frozen.advance(0.5)
        async with pool.claim() as other:
            assert other is None
        assert await item.evict()
        assert not await item.release()
    assert await pool.size() == 0
    assert (await backend.pools.stats(COOKIES.name)).total == 0


async def test_pool_where_filters_list_and_size(backend: Backend) -> None:
    pool = PoolHandle(backend.pools, COOKIES)
    await pool.put(payload=Cookie(value="a1"), tags=CookieTags(site="a"))
    await pool.put(payload=Cookie(value="b1"), tags=CookieTags(site="b", region="us"))
    await pool.put(payload=Cookie(value="b2"), tags=CookieTags(site="b"))
    b = pool.where(site="b")
    assert await b.size() == 2
    assert await b.where(region="us").size() == 1
    listed = await b.list()
    assert sorted(p.value for _, p, _ in listed) == ["b1", "b2"]
    assert all(isinstance(t, CookieTags) for _, _, t in listed)
    item_id = listed[0][0]
    assert await pool.remove(item_id)
    assert await b.size() == 1


async def test_pool_claim_unknown_strategy(backend: Backend) -> None:
    pool = PoolHandle(backend.pools, COOKIES)
    with pytest.raises(ValueError):
        async with pool.claim(strategy="best"):  # type: ignore[arg-type]
            pass


# ------------------------------------------------------------ streams


async def test_stream_handle_typed_entries(backend: Backend) -> None:
    for i in range(3):
        await backend.streams.push(PAGES.name, {"url": f"u{i}"}, worker_id="w")
    stream = StreamHandle(backend.streams, PAGES)
    assert await stream.length() == 3
    peeked = await stream.peek(2)
    assert [e.payload for e in peeked] == [Page(url="u0"), Page(url="u1")]
    read = await stream.read(after=peeked[0].id)
    assert [e.payload.url for e in read] == ["u1", "u2"]
    popped = await stream.pop(3)
    assert [e.payload.url for e in popped] == ["u0", "u1", "u2"]
    assert await stream.length() == 0


# ------------------------------------------------------------ kv, counters, events


async def test_kv_handle_roundtrip_and_get_as(backend: Backend, frozen: ManualClock) -> None:
    kv = KV(backend.kv, "conf-ns")
    await kv.set("model", Cookie(value="v"))
    await kv.set("plain", {"a": [1, 2]})
    assert await kv.get("plain") == {"a": [1, 2]}
    assert await kv.get_as("model", Cookie) == Cookie(value="v")
    assert await kv.get_as("missing", Cookie) is None
    assert await kv.get("missing", default=7) == 7
    assert await kv.setnx("plain", 1) is False
    assert await kv.setnx("new", 1, ttl_seconds=0.2) is True
    await elapse(backend, frozen, 0.3)
    assert await kv.get("new") is None
    assert await kv.delete("plain")
    with pytest.raises(ValueError):
        KV(backend.kv, "")


async def test_counter_handle(backend: Backend) -> None:
    c = Counter(backend.counters, "conf-counter")
    assert await c.incr() == 1
    assert await c.incr(4) == 5
    assert await c.decr(2) == 3
    await c.set(10)
    assert await c.get() == 10
    await c.reset()
    assert await c.get() == 0


async def test_events_handle(backend: Backend) -> None:
    events = Events(backend.events)
    received: list[object] = []
    ready = asyncio.Event()

    async def listen() -> None:
        stream = events.subscribe("conf.topic")
        # The subscription is live once the generator has started.
        first = asyncio.ensure_future(stream.__anext__())
        ready.set()
        received.append(await first)
        await stream.aclose()  # type: ignore[attr-defined]

    listener = asyncio.create_task(listen())
    await ready.wait()

    async def heard() -> bool:
        await events.publish("conf.topic", Cookie(value="m"))
        return listener.done()

    await until(heard, timeout=15, what="the listener to hear a message")
    await listener
    assert received == [{"value": "m"}]


# ------------------------------------------------------------ locks


async def test_lock_context_waits_for_holder(backend: Backend) -> None:
    holder = Lock(backend.locks, "conf-lock", hold_seconds=30, wait_seconds=0)
    assert await holder.acquire()

    async def release_later() -> None:
        await asyncio.sleep(0.3)
        await holder.release()

    task = asyncio.create_task(release_later())
    t0 = time.monotonic()
    async with Lock(backend.locks, "conf-lock", hold_seconds=5, wait_seconds=10) as acquired:
        waited = time.monotonic() - t0
        assert acquired
        assert 0.2 <= waited < 5.0  # woken by the release, not by the wait running out
        assert not await backend.locks.acquire("conf-lock", "someone", 5)
    await task
    assert await backend.locks.acquire("conf-lock", "someone", 5)


async def test_lock_context_gives_up_after_wait(backend: Backend) -> None:
    assert await backend.locks.acquire("conf-lock", "other", 10)
    t0 = time.monotonic()
    async with Lock(backend.locks, "conf-lock", hold_seconds=5, wait_seconds=0.3) as acquired:
        assert not acquired
    assert 0.25 <= time.monotonic() - t0 < 3.0
    assert await backend.locks.release("conf-lock", "other")


async def test_lock_context_renews_while_held(backend: Backend) -> None:
    async with Lock(backend.locks, "conf-lock", hold_seconds=0.45, wait_seconds=0) as acquired:
        assert acquired
        await asyncio.sleep(1.0)  # more than twice hold_seconds
        assert not await backend.locks.acquire("conf-lock", "intruder", 5)
    assert await backend.locks.acquire("conf-lock", "intruder", 5)


async def test_lock_release_does_not_drop_a_newer_holder(
    backend: Backend, frozen: ManualClock
) -> None:
    lock = Lock(backend.locks, "conf-lock", hold_seconds=0.2, wait_seconds=0)
    assert await lock.acquire()
    assert lock._renewer is not None
    lock._renewer.cancel()  # simulate a frozen holder: no more renewals
    await elapse(backend, frozen, 0.3)
    assert await backend.locks.acquire("conf-lock", "newer", 5)
    await lock.release()
    assert not await backend.locks.acquire("conf-lock", "third", 5)
    assert await backend.locks.release("conf-lock", "newer")
