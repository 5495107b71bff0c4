"""Conformance: output streams (push, pop, peek, read, tail, len, trim, emit event)."""

from __future__ import annotations

import asyncio

from fleet.backends.base import Backend
from fleet.core.clock import ManualClock
from fleet.core.records import now

from .helpers import TYPE


async def _fill(backend: Backend, n: int, type_: str = TYPE) -> list[str]:
    ids = []
    for i in range(n):
        entry = await backend.streams.push(type_, {"i": i}, worker_id=f"w{i % 2}")
        ids.append(entry.id)
    return ids


async def test_push_returns_entry_and_ids_sort_by_time(backend: Backend) -> None:
    before = now()
    entry = await backend.streams.push(TYPE, {"title": "x"}, worker_id="w1")
    assert entry.payload == {"title": "x"}
    assert entry.worker_id == "w1"
    assert before - 0.01 <= entry.ts <= now() + 0.01
    ids = await _fill(backend, 5)
    assert ids == sorted(ids)
    assert len(set(ids)) == 5
    assert entry.id < ids[0]


async def test_equal_payloads_are_kept_apart(backend: Backend) -> None:
    for _ in range(3):
        await backend.streams.push(TYPE, {"same": True}, worker_id="w")
    assert await backend.streams.length(TYPE) == 3


async def test_peek_oldest_first_not_removed(backend: Backend) -> None:
    ids = await _fill(backend, 5)
    peeked = await backend.streams.peek(TYPE, n=3)
    assert [e.id for e in peeked] == ids[:3]
    assert [e.payload for e in peeked] == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert await backend.streams.length(TYPE) == 5


async def test_pop_removes_oldest(backend: Backend) -> None:
    ids = await _fill(backend, 5)
    popped = await backend.streams.pop(TYPE, n=2)
    assert [e.id for e in popped] == ids[:2]
    assert await backend.streams.length(TYPE) == 3
    assert [e.id for e in await backend.streams.pop(TYPE, n=10)] == ids[2:]
    assert await backend.streams.pop(TYPE) == []


async def test_concurrent_pops_get_each_entry_once(backend: Backend) -> None:
    ids = await _fill(backend, 40)

    async def consumer() -> list[str]:
        out: list[str] = []
        while got := await backend.streams.pop(TYPE, n=3):
            out += [e.id for e in got]
        return out

    results = await asyncio.gather(*(consumer() for _ in range(5)))
    flat = [i for r in results for i in r]
    assert sorted(flat) == ids


async def test_read_with_cursor(backend: Backend) -> None:
    ids = await _fill(backend, 7)
    first = await backend.streams.read(TYPE, n=3)
    assert [e.id for e in first] == ids[:3]
    second = await backend.streams.read(TYPE, after=first[-1].id, n=3)
    assert [e.id for e in second] == ids[3:6]
    rest = await backend.streams.read(TYPE, after=second[-1].id)
    assert [e.id for e in rest] == ids[6:]
    assert await backend.streams.read(TYPE, after=ids[-1]) == []
    assert await backend.streams.length(TYPE) == 7  # not removed
    new = await backend.streams.push(TYPE, {"i": 99}, worker_id="w")
    assert [e.id for e in await backend.streams.read(TYPE, after=ids[-1])] == [new.id]


async def test_tail_newest_oldest_first(backend: Backend) -> None:
    ids = await _fill(backend, 6)
    assert [e.id for e in await backend.streams.tail(TYPE, n=2)] == ids[-2:]
    assert [e.id for e in await backend.streams.tail(TYPE, n=50)] == ids
    assert await backend.streams.tail("empty-type") == []


async def test_trim_by_count(backend: Backend) -> None:
    for i in range(8):
        await backend.streams.push(TYPE, {"i": i}, worker_id="w", max_len=5)
    assert await backend.streams.length(TYPE) == 5
    assert [e.payload["i"] for e in await backend.streams.peek(TYPE, n=10)] == [3, 4, 5, 6, 7]


async def test_trim_by_age(backend: Backend, frozen: ManualClock) -> None:
    await backend.streams.push(TYPE, {"i": 0}, worker_id="w")
    await backend.streams.push(TYPE, {"i": 1}, worker_id="w")
    frozen.advance(0.3)
    await backend.streams.push(TYPE, {"i": 2}, worker_id="w", max_age=0.2)
    assert await backend.streams.length(TYPE) == 1
    assert [e.payload["i"] for e in await backend.streams.peek(TYPE)] == [2]


async def test_streams_are_per_type(backend: Backend) -> None:
    await _fill(backend, 2, type_="a")
    await _fill(backend, 3, type_="b")
    assert (await backend.streams.length("a"), await backend.streams.length("b")) == (2, 3)


async def test_push_publishes_emit_event(backend: Backend) -> None:
    sub = await backend.events.subscribe(f"{TYPE}.emit")
    try:
        entry = await backend.streams.push(TYPE, {"x": 1}, worker_id="w9")
        topic, message = await asyncio.wait_for(sub.__anext__(), 15)
        assert topic == f"{TYPE}.emit"
        assert message == entry.to_dict()
    finally:
        await sub.aclose()
