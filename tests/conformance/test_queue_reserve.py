"""Conformance: push and reserve (order, tiers, blocking, scheduling, attempts, ttl)."""

from __future__ import annotations

import asyncio
import time

from fleet.backends.base import Backend
from fleet.core.clock import ManualClock
from fleet.core.records import PushRequest, TaskBody, now

from .helpers import SHORT, TYPE, blocked, body, drain, push, req, reserve_ids, reserve_one


async def test_fifo_within_a_tier(backend: Backend) -> None:
    await push(backend, *[f"t{i}" for i in range(10)])
    assert await drain(backend) == [f"t{i}" for i in range(10)]


async def test_high_before_normal_before_low(backend: Backend) -> None:
    await push(backend, "low1", priority=-1)
    await push(backend, "norm1")
    await push(backend, "high1", priority=5)
    await push(backend, "low2", priority=-3)
    await push(backend, "norm2")
    await push(backend, "high2", priority=1)
    assert await reserve_ids(backend, k=1) == ["high1"]
    assert await reserve_ids(backend, k=3) == ["high2", "norm1", "norm2"]
    assert await reserve_ids(backend, k=5) == ["low1", "low2"]
    assert await reserve_ids(backend, k=5) == []


async def test_reserve_k_takes_at_most_k(backend: Backend) -> None:
    await push(backend, *[f"t{i}" for i in range(5)])
    got = await backend.queues.reserve(TYPE, k=3)
    assert [r.body.id for r in got] == ["t0", "t1", "t2"]
    assert len({r.token for r in got}) == 3
    depths = await backend.queues.depths(TYPE)
    assert (depths.normal, depths.processing) == (2, 3)


async def test_reservation_carries_lease_and_payload(backend: Backend) -> None:
    await backend.queues.push(
        TYPE, [req("a", payload={"url": "https://x", "n": [1, 2]}, priority=2)]
    )
    before = now()
    r = await reserve_one(backend, visibility_seconds=30)
    assert r.body.payload == {"url": "https://x", "n": [1, 2]}
    assert r.body.priority == 2
    assert r.body.attempt == 1
    assert before + 29 <= r.deadline <= now() + 31
    assert r.token


async def test_reserve_on_empty_queue_returns_at_once(backend: Backend) -> None:
    t0 = time.monotonic()
    assert await backend.queues.reserve(TYPE, timeout=0) == []
    assert time.monotonic() - t0 < 2.0


async def test_blocking_reserve_times_out_empty(backend: Backend) -> None:
    t0 = time.monotonic()
    assert await backend.queues.reserve(TYPE, timeout=0.3) == []
    waited = time.monotonic() - t0
    assert 0.25 <= waited < 3.0


async def test_blocking_reserve_wakes_on_push_promptly(backend: Backend) -> None:
    async def push_later() -> float:
        await blocked(backend)
        await push(backend, "late")
        return time.monotonic()

    pusher = asyncio.create_task(push_later())
    got = await backend.queues.reserve(TYPE, timeout=10.0)
    woke = time.monotonic()
    pushed_at = await pusher
    assert [r.body.id for r in got] == ["late"]
    assert woke - pushed_at < 5.0  # far below the timeout


async def test_many_blocked_reservers_each_get_one_task(backend: Backend) -> None:
    waiters = [asyncio.create_task(backend.queues.reserve(TYPE, timeout=10.0)) for _ in range(4)]
    await blocked(backend, 4)
    await push(backend, "a", "b", "c", "d")
    results = await asyncio.gather(*waiters)
    ids = sorted(r.body.id for got in results for r in got)
    assert ids == ["a", "b", "c", "d"]


async def test_cancelled_reserver_loses_no_task(backend: Backend) -> None:
    waiter = asyncio.create_task(backend.queues.reserve(TYPE, timeout=2.5))
    await blocked(backend)
    waiter.cancel()
    await push(backend, "kept")
    await asyncio.gather(waiter, return_exceptions=True)
    # A reserve the cancel came too late for gives the task back in the background.
    assert await reserve_ids(backend, timeout=10.0) == ["kept"]


async def test_wake_up_of_a_cancelled_reserver_is_not_lost(backend: Backend) -> None:
    first = asyncio.create_task(backend.queues.reserve(TYPE, timeout=10.0))
    await blocked(backend)
    second = asyncio.create_task(backend.queues.reserve(TYPE, timeout=10.0))
    await blocked(backend, 2)
    await push(backend, "x")
    t0 = time.monotonic()
    first.cancel()  # possibly after the push already woke it
    (outcome,) = await asyncio.gather(first, return_exceptions=True)
    if isinstance(outcome, list) and outcome:
        second.cancel()
        await asyncio.gather(second, return_exceptions=True)
        assert [r.body.id for r in outcome] == ["x"]
    else:
        # The wake-up the cancelled reserver took is handed on, not lost until
        # the other reserver's timeout.
        got = await asyncio.wait_for(second, 10.5)
        assert [r.body.id for r in got] == ["x"]
        assert time.monotonic() - t0 < 5.0


async def test_delayed_push_is_scheduled_until_due(backend: Backend, frozen: ManualClock) -> None:
    await backend.queues.push(TYPE, [req("later", delay_seconds=0.4)])
    depths = await backend.queues.depths(TYPE)
    assert (depths.scheduled, depths.pending) == (1, 0)
    state = await backend.queues.state(TYPE, "later")
    assert state.state == "scheduled"
    assert state.ready_at is not None and state.ready_at > now()
    assert await reserve_ids(backend) == []
    frozen.advance(0.5)
    assert await reserve_ids(backend) == ["later"]


async def test_blocked_reserve_wakes_for_scheduled_task(backend: Backend) -> None:
    await backend.queues.push(TYPE, [req("soon", delay_seconds=0.3)])
    t0 = time.monotonic()
    got = await backend.queues.reserve(TYPE, timeout=10.0)
    waited = time.monotonic() - t0
    assert [r.body.id for r in got] == ["soon"]
    assert 0.2 <= waited < 5.0


async def test_blocked_reserve_wakes_for_task_scheduled_while_waiting(backend: Backend) -> None:
    async def schedule_later() -> None:
        await blocked(backend)
        await backend.queues.push(TYPE, [req("sched", delay_seconds=0.2)])

    task = asyncio.create_task(schedule_later())
    t0 = time.monotonic()
    got = await backend.queues.reserve(TYPE, timeout=10.0)
    await task
    assert [r.body.id for r in got] == ["sched"]
    assert time.monotonic() - t0 < 5.0


async def test_due_scheduled_task_goes_to_tail_of_its_tier(
    backend: Backend, frozen: ManualClock
) -> None:
    await backend.queues.push(TYPE, [req("sched", delay_seconds=0.2, priority=1)])
    await push(backend, "h1", priority=1)
    frozen.advance(0.3)
    await push(backend, "h2", priority=1)
    await push(backend, "n1")
    # "sched" came due before h2 was pushed; it joins the high tier at reserve time.
    got = await reserve_ids(backend, k=4)
    assert got[0] == "h1"
    assert set(got[1:3]) == {"sched", "h2"}
    assert got[3] == "n1"


async def test_attempt_is_charged_at_reserve(backend: Backend, frozen: ManualClock) -> None:
    await push(backend, "a", max_attempts=5)
    r1 = await reserve_one(backend, visibility_seconds=SHORT)
    assert r1.body.attempt == 1
    assert await backend.queues.mark_started(TYPE, [("a", r1.token)]) == [True]
    frozen.advance(SHORT + 0.1)
    assert await backend.queues.sweep(TYPE) == 1
    r2 = await reserve_one(backend)
    assert r2.body.attempt == 2
    info = await backend.queues.state(TYPE, "a")
    assert (info.state, info.attempt, info.max_attempts) == ("processing", 2, 5)


async def test_default_max_attempts_is_applied_and_stored(backend: Backend) -> None:
    await push(backend, "a")
    r = await reserve_one(backend, default_max_attempts=7)
    assert r.body.max_attempts == 7
    assert (await backend.queues.state(TYPE, "a")).max_attempts == 7
    # A later reserve with another default does not change the stored value.
    assert await backend.queues.release(TYPE, "a", r.token)
    r = await reserve_one(backend, default_max_attempts=2)
    assert r.body.max_attempts == 7


async def test_explicit_max_attempts_wins_over_default(backend: Backend) -> None:
    await push(backend, "a", max_attempts=1)
    r = await reserve_one(backend, default_max_attempts=9)
    assert r.body.max_attempts == 1


async def test_reserve_dead_letters_when_lost_attempts_exhaust(
    backend: Backend, frozen: ManualClock
) -> None:
    await push(backend, "poison", max_attempts=2)
    for attempt in (1, 2):
        r = await reserve_one(backend, visibility_seconds=0.05)
        assert r.body.attempt == attempt
        assert await backend.queues.mark_started(TYPE, [("poison", r.token)]) == [True]
        frozen.advance(0.1)
        assert await backend.queues.sweep(TYPE) == 1  # the worker "crashed" while it ran
    assert await backend.queues.reserve(TYPE, k=5) == []
    dead = await backend.queues.dead_peek(TYPE)
    assert [b.id for b in dead] == ["poison"]
    assert dead[0].last_error
    depths = await backend.queues.depths(TYPE)
    assert (depths.dead, depths.pending, depths.processing) == (1, 0, 0)
    assert depths.counters.dead == 1
    assert (await backend.queues.state(TYPE, "poison")).state == "dead"


async def test_expired_ttl_task_is_dropped_and_counted(
    backend: Backend, frozen: ManualClock
) -> None:
    await push(backend, "stale", ttl_seconds=0.1)
    await push(backend, "fresh", ttl_seconds=60)
    frozen.advance(0.2)
    assert await reserve_ids(backend, k=5) == ["fresh"]
    depths = await backend.queues.depths(TYPE)
    assert depths.counters.expired == 1
    assert depths.pending == 0
    assert (await backend.queues.state(TYPE, "stale")).state == "unknown"


async def test_enqueued_at_is_kept(backend: Backend) -> None:
    b = body("a")
    await backend.queues.push(TYPE, [PushRequest(b)])
    r = await reserve_one(backend)
    assert abs(r.body.enqueued_at - b.enqueued_at) < 1e-3


async def test_the_submit_time_is_read_back_wherever_a_body_is(backend: Backend) -> None:
    # Redis keeps enqueued_at in the task's record, not in the stored body
    # (docs/redis-schema.md, "Bodies"): every reader must put it back.
    at = now() - 30.0

    def sent(task_id: str, delay: float = 0.0) -> PushRequest:
        return PushRequest(TaskBody(id=task_id, payload={"n": 1}, enqueued_at=at), delay)

    await backend.queues.push(TYPE, [sent("queued"), sent("later", delay=600.0)])
    depths = await backend.queues.depths(TYPE)
    assert depths.oldest_pending_age is not None and 29.0 < depths.oldest_pending_age < 40.0
    for task_id in ("queued", "later"):
        got = await backend.browse.body(TYPE, task_id)
        assert got is not None and got.enqueued_at == at, (task_id, got)
    r = await reserve_one(backend)
    assert r.body.id == "queued" and r.body.enqueued_at == at
    held = await backend.browse.body(TYPE, "queued")
    assert held is not None and held.enqueued_at == at
    # A retry goes back to the queue with the same submit time, and so does the DLQ.
    assert await backend.queues.nack(TYPE, "queued", r.token, delay_seconds=0, error="x") == "retry"
    again = await reserve_one(backend)
    assert again.body.id == "queued" and again.body.enqueued_at == at
    outcome = await backend.queues.nack(
        TYPE, "queued", again.token, delay_seconds=0, error="y", dead=True
    )
    assert outcome == "dead"
    assert [b.enqueued_at for b in await backend.queues.dead_peek(TYPE)] == [at]
    dead = await backend.browse.body(TYPE, "queued")
    assert dead is not None and dead.enqueued_at == at


async def test_types_are_independent(backend: Backend) -> None:
    await push(backend, "a", type_="type-a")
    await push(backend, "b", type_="type-b")
    assert await reserve_ids(backend, type_="type-b", k=5) == ["b"]
    assert await reserve_ids(backend, type_="type-a", k=5) == ["a"]


async def test_payload_mutation_does_not_leak_into_queue(backend: Backend) -> None:
    payload = {"items": [1]}
    await backend.queues.push(TYPE, [req("a", payload=payload)])
    payload["items"].append(2)
    r = await reserve_one(backend, visibility_seconds=SHORT)
    assert r.body.payload == {"items": [1]}
    r.body.payload["items"].append(3)
    assert await backend.queues.release(TYPE, "a", r.token)
    assert (await reserve_one(backend)).body.payload == {"items": [1]}
