"""Single pushes made at once (slots submitting together, concurrent REST submits) go
as batched pushes, on every backend: each caller gets its own
answer, in order, a duplicate in the same turn is caught, a caller alone waits for
nothing (a failed step fails every push in it: tests/redis/test_stream_batches.py)."""

from __future__ import annotations

import asyncio

from fleet.backends.base import Backend
from fleet.core.capabilities.queues import ONE_BY_ONE_BATCH

from .helpers import TYPE, drain, req


async def test_pushes_of_one_turn_answer_each_caller(backend: Backend) -> None:
    n = ONE_BY_ONE_BATCH * 2 + 5  # three batches
    results = await asyncio.gather(
        *(backend.queues.push_one(TYPE, req(f"t{i:03}")) for i in range(n))
    )
    assert [r.task_id for r in results] == [f"t{i:03}" for i in range(n)]
    assert all(r.queued and not r.duplicate for r in results)
    assert sorted(await drain(backend)) == [f"t{i:03}" for i in range(n)]


async def test_a_duplicate_in_the_same_turn_is_caught(backend: Backend) -> None:
    first, again, twin = await asyncio.gather(
        backend.queues.push_one(TYPE, req("a", idempotency_key="k")),
        backend.queues.push_one(TYPE, req("b", idempotency_key="k")),
        backend.queues.push_one(TYPE, req("a")),
    )
    assert first.queued and first.task_id == "a"
    assert again.duplicate and not again.queued and again.task_id == "a"
    assert twin.duplicate and not twin.queued
    assert await drain(backend) == ["a"]


async def test_types_of_one_turn_go_to_their_own_queues(backend: Backend) -> None:
    await asyncio.gather(
        backend.queues.push_one(TYPE, req("x1")),
        backend.queues.push_one("other", req("y1")),
        backend.queues.push_one(TYPE, req("x2")),
    )
    assert await drain(backend) == ["x1", "x2"]
    other = await backend.queues.reserve("other", k=5)
    assert [r.body.id for r in other] == ["y1"]


async def test_a_push_alone_in_its_turn(backend: Backend) -> None:
    for i in range(3):
        result = await backend.queues.push_one(TYPE, req(f"s{i}"))
        assert result.queued and result.task_id == f"s{i}"
    assert await drain(backend) == ["s0", "s1", "s2"]
