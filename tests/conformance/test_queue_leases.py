"""Conformance: ack, nack, release, extend and sweep, including stale tokens."""

from __future__ import annotations

import asyncio

from fleet.backends.base import Backend
from fleet.core.clock import ManualClock
from fleet.core.records import LeaseStatus, now

from .helpers import SHORT, TYPE, blocked, push, reserve_ids, reserve_one


async def test_ack_finishes_owned_task(backend: Backend) -> None:
    await push(backend, "a", "b")
    got = await backend.queues.reserve(TYPE, k=2)
    assert await backend.queues.ack(TYPE, [(r.body.id, r.token) for r in got]) == [True, True]
    depths = await backend.queues.depths(TYPE)
    assert (depths.processing, depths.pending) == (0, 0)
    assert depths.counters.completed == 2
    info = await backend.queues.state(TYPE, "a")
    assert info.state == "done"
    assert info.attempt == 1
    assert info.finished_at is not None and info.finished_at <= now() + 1


async def test_ack_with_wrong_token_or_twice_is_refused(backend: Backend) -> None:
    await push(backend, "a")
    r = await reserve_one(backend)
    assert await backend.queues.ack(TYPE, [("a", "not-the-token"), ("missing", r.token)]) == [
        False,
        False,
    ]
    assert (await backend.queues.state(TYPE, "a")).state == "processing"
    assert await backend.queues.ack(TYPE, [("a", r.token)]) == [True]
    assert await backend.queues.ack(TYPE, [("a", r.token)]) == [False]
    assert (await backend.queues.depths(TYPE)).counters.completed == 1


async def test_ack_mixed_batch_answers_per_lease(backend: Backend) -> None:
    await push(backend, "a", "b")
    ra, rb = await backend.queues.reserve(TYPE, k=2)
    assert await backend.queues.ack(TYPE, [(ra.body.id, ra.token), (rb.body.id, "stale")]) == [
        True,
        False,
    ]


async def test_nack_schedules_retry_keeping_priority(backend: Backend, frozen: ManualClock) -> None:
    await push(backend, "a", priority=3, max_attempts=3)
    r = await reserve_one(backend)
    outcome = await backend.queues.nack(TYPE, "a", r.token, delay_seconds=0.3, error="boom")
    assert outcome == "retry"
    info = await backend.queues.state(TYPE, "a")
    assert info.state == "scheduled"
    assert info.ready_at is not None
    depths = await backend.queues.depths(TYPE)
    assert (depths.scheduled, depths.processing, depths.counters.failed) == (1, 0, 1)
    assert await reserve_ids(backend) == []
    frozen.advance(0.4)
    await push(backend, "normal")
    r2 = await reserve_one(backend)
    assert r2.body.id == "a"  # still high priority
    assert r2.body.priority == 3
    assert r2.body.attempt == 2


async def test_nack_zero_delay_is_reservable_at_once(backend: Backend) -> None:
    await push(backend, "a")
    r = await reserve_one(backend)
    assert await backend.queues.nack(TYPE, "a", r.token, delay_seconds=0) == "retry"
    assert await reserve_ids(backend, timeout=1.0) == ["a"]


async def test_nack_on_last_attempt_dead_letters_with_error(backend: Backend) -> None:
    await push(backend, "a", max_attempts=2, payload={"k": "v"})
    r = await reserve_one(backend)
    assert await backend.queues.nack(TYPE, "a", r.token, delay_seconds=0, error="e1") == "retry"
    r = await reserve_one(backend, timeout=1.0)
    outcome = await backend.queues.nack(
        TYPE, "a", r.token, delay_seconds=0, error="e2", traceback="Traceback: line 1"
    )
    assert outcome == "dead"
    dead = await backend.queues.dead_peek(TYPE)
    assert len(dead) == 1
    d = dead[0]
    assert (d.id, d.payload, d.attempt) == ("a", {"k": "v"}, 2)
    assert d.last_error == "e2"
    assert d.traceback == "Traceback: line 1"
    assert d.failed_at is not None
    depths = await backend.queues.depths(TYPE)
    assert (depths.dead, depths.counters.dead, depths.counters.failed) == (1, 1, 1)
    info = await backend.queues.state(TYPE, "a")
    assert (info.state, info.last_error) == ("dead", "e2")


async def test_nack_dead_flag_forces_dlq(backend: Backend) -> None:
    await push(backend, "a", max_attempts=10)
    r = await reserve_one(backend)
    assert await backend.queues.nack(
        TYPE, "a", r.token, delay_seconds=5, error="fatal", dead=True
    ) == ("dead")
    assert [b.id for b in await backend.queues.dead_peek(TYPE)] == ["a"]


async def test_nack_with_stale_token_changes_nothing(backend: Backend) -> None:
    await push(backend, "a")
    r = await reserve_one(backend)
    assert await backend.queues.nack(TYPE, "a", "stale", delay_seconds=0, error="x") == "stale"
    assert await backend.queues.nack(TYPE, "missing", r.token, delay_seconds=0) == "stale"
    assert (await backend.queues.state(TYPE, "a")).state == "processing"
    assert await backend.queues.ack(TYPE, [("a", r.token)]) == [True]
    assert await backend.queues.nack(TYPE, "a", r.token, delay_seconds=0) == "stale"
    assert (await backend.queues.depths(TYPE)).counters.failed == 0


async def test_release_refunds_attempt_and_puts_at_head(backend: Backend) -> None:
    await push(backend, "a", "b", "c")
    r = await reserve_one(backend)
    assert r.body.attempt == 1
    assert await backend.queues.release(TYPE, "a", r.token)
    r2 = await reserve_one(backend)
    assert r2.body.id == "a"
    assert r2.body.attempt == 1
    assert r2.token != r.token
    # The old token no longer works anywhere.
    assert not await backend.queues.release(TYPE, "a", r.token)
    assert await backend.queues.ack(TYPE, [("a", r.token)]) == [False]


async def test_release_puts_at_head_of_own_tier_only(backend: Backend) -> None:
    await push(backend, "low", priority=-1)
    r = await reserve_one(backend)
    await push(backend, "norm")
    assert await backend.queues.release(TYPE, "low", r.token)
    assert await reserve_ids(backend, k=2) == ["norm", "low"]


async def test_extend_keeps_lease_past_original_deadline(
    backend: Backend, frozen: ManualClock
) -> None:
    await push(backend, "a")
    r = await reserve_one(backend, visibility_seconds=SHORT)
    frozen.advance(SHORT / 2)
    assert await backend.queues.extend(TYPE, "a", r.token, 30.0) == LeaseStatus.OK
    info = await backend.queues.state(TYPE, "a")
    assert info.deadline is not None and info.deadline > now() + 20
    frozen.advance(SHORT)
    assert await backend.queues.sweep(TYPE) == 0
    assert await backend.queues.ack(TYPE, [("a", r.token)]) == [True]


async def test_extend_with_stale_token(backend: Backend) -> None:
    await push(backend, "a")
    r = await reserve_one(backend)
    assert await backend.queues.extend(TYPE, "a", "other", 10) == LeaseStatus.STALE
    assert await backend.queues.extend(TYPE, "nope", r.token, 10) == LeaseStatus.STALE
    await backend.queues.ack(TYPE, [("a", r.token)])
    assert await backend.queues.extend(TYPE, "a", r.token, 10) == LeaseStatus.STALE


async def test_sweep_requeues_only_expired_leases_at_head(
    backend: Backend, frozen: ManualClock
) -> None:
    await push(backend, "x", "y")
    short = await reserve_one(backend, visibility_seconds=SHORT)
    long = await reserve_one(backend, visibility_seconds=30)
    assert await backend.queues.mark_started(TYPE, [(short.body.id, short.token)]) == [True]
    await push(backend, "z")
    frozen.advance(SHORT + 0.1)
    assert await backend.queues.sweep(TYPE) == 1
    assert (await backend.queues.state(TYPE, short.body.id)).state == "queued"
    assert (await backend.queues.state(TYPE, long.body.id)).state == "processing"
    r = await reserve_one(backend)
    assert r.body.id == short.body.id  # ahead of z, which was pushed earlier
    assert r.body.attempt == 2  # the lost attempt ran (marked started): it stays charged
    assert await backend.queues.sweep(TYPE) == 0


async def test_ack_after_sweep_is_refused(backend: Backend, frozen: ManualClock) -> None:
    await push(backend, "a")
    zombie = await reserve_one(backend, visibility_seconds=0.1)
    frozen.advance(0.2)
    assert await backend.queues.sweep(TYPE) == 1
    assert await backend.queues.ack(TYPE, [("a", zombie.token)]) == [False]
    assert await backend.queues.nack(TYPE, "a", zombie.token, delay_seconds=0) == "stale"
    assert await backend.queues.extend(TYPE, "a", zombie.token, 10) == LeaseStatus.STALE
    assert not await backend.queues.release(TYPE, "a", zombie.token)
    fresh = await reserve_one(backend)
    assert await backend.queues.ack(TYPE, [("a", zombie.token)]) == [False]
    assert await backend.queues.ack(TYPE, [("a", fresh.token)]) == [True]
    assert (await backend.queues.depths(TYPE)).counters.completed == 1


async def test_sweep_keeps_priority(backend: Backend, frozen: ManualClock) -> None:
    await push(backend, "h", priority=2)
    await reserve_one(backend, visibility_seconds=0.1)
    await push(backend, "n")
    frozen.advance(0.2)
    assert await backend.queues.sweep(TYPE) == 1
    depths = await backend.queues.depths(TYPE)
    assert (depths.high, depths.normal) == (1, 1)
    assert await reserve_ids(backend, k=2) == ["h", "n"]


async def test_sweep_promotes_due_scheduled_tasks(backend: Backend, frozen: ManualClock) -> None:
    await push(backend, "a")
    r = await reserve_one(backend)
    await backend.queues.nack(TYPE, "a", r.token, delay_seconds=0.1)
    frozen.advance(0.2)
    assert await backend.queues.sweep(TYPE) == 0
    depths = await backend.queues.depths(TYPE)
    assert (depths.scheduled, depths.normal) == (0, 1)
    assert (await backend.queues.state(TYPE, "a")).state == "queued"


async def test_sweep_wakes_blocked_reserver(backend: Backend, frozen: ManualClock) -> None:
    await push(backend, "a")
    await reserve_one(backend, visibility_seconds=0.1)
    waiter = asyncio.create_task(backend.queues.reserve(TYPE, timeout=10.0))
    await blocked(backend)
    frozen.advance(0.2)
    assert await backend.queues.sweep(TYPE) == 1
    got = await asyncio.wait_for(waiter, 10.5)
    assert [r.body.id for r in got] == ["a"]


async def test_concurrent_reservers_never_share_a_task(backend: Backend) -> None:
    ids = [f"t{i}" for i in range(60)]
    await push(backend, *ids)

    async def worker() -> list[str]:
        seen: list[str] = []
        while got := await backend.queues.reserve(TYPE, k=3):
            seen += [r.body.id for r in got]
            assert all(await backend.queues.ack(TYPE, [(r.body.id, r.token) for r in got]))
        return seen

    results = await asyncio.gather(*(worker() for _ in range(6)))
    flat = [i for seen in results for i in seen]
    assert sorted(flat) == sorted(ids)
    assert (await backend.queues.depths(TYPE)).counters.completed == 60
