"""Conformance of the Primitives capability: kv, locks, counters."""

from __future__ import annotations

import asyncio

from fleet.backends.base import Backend
from fleet.core.clock import ManualClock

from .helpers import elapse

# ------------------------------------------------------------ kv


async def test_kv_set_get_delete(backend: Backend) -> None:
    assert await backend.kv.get("ns", "k") is None
    await backend.kv.set("ns", "k", '{"a":1}')
    assert await backend.kv.get("ns", "k") == '{"a":1}'
    await backend.kv.set("ns", "k", "v2")
    assert await backend.kv.get("ns", "k") == "v2"
    assert await backend.kv.get("other-ns", "k") is None
    assert await backend.kv.delete("ns", "k")
    assert not await backend.kv.delete("ns", "k")
    assert await backend.kv.get("ns", "k") is None


async def test_kv_namespaces_do_not_collide(backend: Backend) -> None:
    await backend.kv.set("a", "b:c", "1")
    await backend.kv.set("a:b", "c", "2")
    assert await backend.kv.get("a", "b:c") == "1"
    assert await backend.kv.get("a:b", "c") == "2"


async def test_kv_ttl(backend: Backend, frozen: ManualClock) -> None:
    await backend.kv.set("ns", "k", "v", ttl_seconds=0.4)
    assert await backend.kv.get("ns", "k") == "v"
    await elapse(backend, frozen, 0.5)
    assert await backend.kv.get("ns", "k") is None
    assert not await backend.kv.delete("ns", "k")


async def test_kv_set_replaces_ttl(backend: Backend, frozen: ManualClock) -> None:
    await backend.kv.set("ns", "k", "v", ttl_seconds=0.2)
    await backend.kv.set("ns", "k", "v2")
    await elapse(backend, frozen, 0.3)
    assert await backend.kv.get("ns", "k") == "v2"


async def test_kv_setnx(backend: Backend) -> None:
    assert await backend.kv.setnx("ns", "k", "first")
    assert not await backend.kv.setnx("ns", "k", "second")
    assert await backend.kv.get("ns", "k") == "first"


async def test_kv_setnx_after_expiry(backend: Backend, frozen: ManualClock) -> None:
    assert await backend.kv.setnx("ns", "k", "first", ttl_seconds=0.2)
    await elapse(backend, frozen, 0.3)
    assert await backend.kv.setnx("ns", "k", "second")
    assert await backend.kv.get("ns", "k") == "second"


async def test_kv_concurrent_setnx_exactly_one_wins(backend: Backend) -> None:
    results = await asyncio.gather(*(backend.kv.setnx("ns", "race", str(i)) for i in range(20)))
    assert results.count(True) == 1
    winner = results.index(True)
    assert await backend.kv.get("ns", "race") == str(winner)


# ------------------------------------------------------------ locks


async def test_lock_acquire_release_token_semantics(backend: Backend) -> None:
    assert await backend.locks.acquire("L", "t1", 10)
    assert not await backend.locks.acquire("L", "t2", 10)
    assert not await backend.locks.acquire("L", "t1", 10)  # not re-entrant
    assert not await backend.locks.release("L", "t2")
    assert await backend.locks.release("L", "t1")
    assert not await backend.locks.release("L", "t1")
    assert await backend.locks.acquire("L", "t2", 10)


async def test_lock_expires(backend: Backend, frozen: ManualClock) -> None:
    assert await backend.locks.acquire("L", "t1", 0.2)
    await elapse(backend, frozen, 0.3)
    assert await backend.locks.acquire("L", "t2", 10)
    # The expired holder can neither renew nor release the new holder's lock.
    assert not await backend.locks.renew("L", "t1", 10)
    assert not await backend.locks.release("L", "t1")
    assert await backend.locks.release("L", "t2")


async def test_lock_renew(backend: Backend, frozen: ManualClock) -> None:
    assert await backend.locks.acquire("L", "t1", 0.4)
    assert await backend.locks.renew("L", "t1", 2)
    assert not await backend.locks.renew("L", "t2", 2)
    await elapse(backend, frozen, 0.5)
    assert not await backend.locks.acquire("L", "t2", 10)
    assert not await backend.locks.renew("free-lock", "t1", 2)


async def test_lock_concurrent_acquire_one_winner(backend: Backend) -> None:
    results = await asyncio.gather(*(backend.locks.acquire("L", f"t{i}", 5) for i in range(10)))
    assert results.count(True) == 1


# ------------------------------------------------------------ counters


async def test_counters(backend: Backend) -> None:
    assert await backend.counters.get("c") == 0
    assert await backend.counters.incr("c") == 1
    assert await backend.counters.incr("c", 5) == 6
    assert await backend.counters.incr("c", -10) == -4
    assert await backend.counters.get("c") == -4
    await backend.counters.set("c", 42)
    assert await backend.counters.get("c") == 42
    await backend.counters.delete("c")
    assert await backend.counters.get("c") == 0
    assert await backend.counters.incr("absent", -1) == -1


async def test_counter_concurrent_increments(backend: Backend) -> None:
    await asyncio.gather(*(backend.counters.incr("c", 2) for _ in range(50)))
    assert await backend.counters.get("c") == 100
