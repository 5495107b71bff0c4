"""Conformance: DLQ, depths, task states, cancel, idempotency, duplicates, purge."""

from __future__ import annotations

import asyncio

from fleet.backends.base import Backend
from fleet.core.clock import ManualClock
from fleet.core.records import LeaseStatus, PushRequest, now

from .helpers import TYPE, blocked, body, elapse, push, req, reserve_ids, reserve_one


async def _kill(backend: Backend, task_id: str, error: str = "boom") -> None:
    r = await reserve_one(backend)
    assert r.body.id == task_id
    assert await backend.queues.nack(
        TYPE, task_id, r.token, delay_seconds=0, error=error, dead=True
    ) == ("dead")


# ------------------------------------------------------------ dead letters
async def test_dead_peek_oldest_death_first_not_removed(backend: Backend) -> None:
    for tid in ("d1", "d2", "d3"):
        await push(backend, tid)
        await _kill(backend, tid)
    assert [b.id for b in await backend.queues.dead_peek(TYPE, n=2)] == ["d1", "d2"]
    assert [b.id for b in await backend.queues.dead_peek(TYPE)] == ["d1", "d2", "d3"]
    assert (await backend.queues.depths(TYPE)).dead == 3


async def test_an_id_that_dies_again_keeps_one_dead_letter(backend: Backend) -> None:
    # Submitted again while its first life is in the DLQ, the id dies again: the DLQ
    # holds the newest death only, at the tail; the counter counts both deaths.
    await push(backend, "twice", payload={"life": 1})
    await _kill(backend, "twice", error="first")
    await push(backend, "other")
    await _kill(backend, "other")
    await push(backend, "twice", payload={"life": 2})
    await _kill(backend, "twice", error="second")
    dead = await backend.queues.dead_peek(TYPE)
    assert [(b.id, b.payload) for b in dead] == [("other", {"n": 1}), ("twice", {"life": 2})]
    depths = await backend.queues.depths(TYPE)
    assert (depths.dead, depths.counters.dead) == (2, 3)
    assert (await backend.queues.state(TYPE, "twice")).last_error == "second"
    assert await backend.queues.dead_replay(TYPE, task_ids=["twice"]) == 1
    assert (await backend.queues.depths(TYPE)).dead == 1


async def test_dead_replay_n_oldest_resets_attempt(backend: Backend) -> None:
    for tid in ("d1", "d2", "d3"):
        await push(backend, tid, priority=-2)
        await _kill(backend, tid, error=f"err-{tid}")
    assert await backend.queues.dead_replay(TYPE, n=2) == 2
    assert [b.id for b in await backend.queues.dead_peek(TYPE)] == ["d3"]
    depths = await backend.queues.depths(TYPE)
    assert (depths.low, depths.dead) == (2, 1)
    info = await backend.queues.state(TYPE, "d1")
    assert (info.state, info.attempt, info.priority) == ("queued", 0, -2)
    r = await reserve_one(backend)
    assert (r.body.id, r.body.attempt, r.body.priority) == ("d1", 1, -2)
    assert r.body.last_error == "err-d1"  # kept for the record


async def test_dead_replay_goes_to_tail_of_tier(backend: Backend) -> None:
    await push(backend, "d")
    await _kill(backend, "d")
    await push(backend, "q")
    assert await backend.queues.dead_replay(TYPE) == 1
    assert await reserve_ids(backend, k=2) == ["q", "d"]


async def test_dead_replay_by_ids(backend: Backend) -> None:
    for tid in ("d1", "d2", "d3"):
        await push(backend, tid, priority=4)
        await _kill(backend, tid)
    assert await backend.queues.dead_replay(TYPE, task_ids=["d3", "d1", "nope"]) == 2
    assert [b.id for b in await backend.queues.dead_peek(TYPE)] == ["d2"]
    assert sorted(await reserve_ids(backend, k=5)) == ["d1", "d3"]
    assert (await backend.queues.depths(TYPE)).high == 0


async def test_dead_replay_all_and_clear(backend: Backend) -> None:
    for tid in ("d1", "d2"):
        await push(backend, tid)
        await _kill(backend, tid)
    assert await backend.queues.dead_replay(TYPE) == 2
    assert await backend.queues.dead_replay(TYPE) == 0
    for tid in ("d1", "d2"):
        await _kill(backend, tid)
    assert await backend.queues.dead_clear(TYPE) == 2
    assert await backend.queues.dead_peek(TYPE) == []
    assert await backend.queues.dead_clear(TYPE) == 0
    assert (await backend.queues.depths(TYPE)).dead == 0


async def test_replayed_task_gets_full_attempts_again(backend: Backend) -> None:
    await push(backend, "a", max_attempts=1)
    r = await reserve_one(backend)
    assert await backend.queues.nack(TYPE, "a", r.token, delay_seconds=0) == "dead"
    assert await backend.queues.dead_replay(TYPE) == 1
    r = await reserve_one(backend)
    assert r.body.attempt == 1
    assert await backend.queues.nack(TYPE, "a", r.token, delay_seconds=0) == "dead"


# ------------------------------------------------------------ depths
async def test_depths_by_tier_and_state(backend: Backend) -> None:
    empty = await backend.queues.depths(TYPE)
    assert (empty.pending, empty.processing, empty.scheduled, empty.dead) == (0, 0, 0, 0)
    assert empty.oldest_pending_age is None
    await push(backend, "h1", "h2", priority=1)
    await push(backend, "n1")
    await push(backend, "l1", "l2", "l3", priority=-1)
    await backend.queues.push(TYPE, [req("s1", delay_seconds=30)])
    await reserve_one(backend)
    d = await backend.queues.depths(TYPE)
    assert (d.high, d.normal, d.low, d.processing, d.scheduled, d.dead) == (1, 1, 3, 1, 1, 0)
    assert d.pending == 5
    assert d.counters.submitted == 7
    assert d.to_dict()["pending_total"] == 5


async def test_oldest_pending_age(backend: Backend, frozen: ManualClock) -> None:
    await push(backend, "a")
    frozen.advance(0.3)
    await push(backend, "b", priority=1)
    age = (await backend.queues.depths(TYPE)).oldest_pending_age
    assert age is not None and 0.25 <= age < 5


async def test_oldest_pending_age_counts_tasks_in_groups(backend: Backend) -> None:
    """A task waiting in a group is pending like any other: the oldest-pending age
    (and the stuck-queue alert on it) sees it (issue 40, finding 10)."""
    old = body("grouped").evolve(group="g1", enqueued_at=now() - 100)
    results = await backend.queues.push(TYPE, [PushRequest(old, 0.0)])
    assert results[0].queued
    await push(backend, "plain")
    age = (await backend.queues.depths(TYPE)).oldest_pending_age
    assert age is not None and 99 <= age < 110, age


async def test_counters_accumulate(backend: Backend, frozen: ManualClock) -> None:
    await push(backend, "ok", "retry", "dead", "cancel")
    await push(backend, "exp", ttl_seconds=0.05)
    frozen.advance(0.1)
    got = {r.body.id: r for r in await backend.queues.reserve(TYPE, k=3, default_max_attempts=5)}
    assert set(got) == {"ok", "retry", "dead"}
    await backend.queues.ack(TYPE, [("ok", got["ok"].token)])
    await backend.queues.nack(TYPE, "retry", got["retry"].token, delay_seconds=30)
    await backend.queues.nack(TYPE, "dead", got["dead"].token, delay_seconds=0, dead=True)
    assert await backend.queues.cancel(TYPE, "cancel") == "cancelled"
    assert await backend.queues.reserve(TYPE, k=5) == []  # drops the expired one
    c = (await backend.queues.depths(TYPE)).counters
    assert (c.submitted, c.completed, c.failed, c.dead, c.expired, c.cancelled) == (
        5,
        1,
        1,
        1,
        1,
        1,
    )


# ------------------------------------------------------------ task state and cancel
async def test_task_state_of_each_state(backend: Backend) -> None:
    assert (await backend.queues.state(TYPE, "never")).state == "unknown"
    await push(backend, "q", priority=2, max_attempts=4)
    info = await backend.queues.state(TYPE, "q")
    assert (info.state, info.attempt, info.priority) == ("queued", 0, 2)
    r = await reserve_one(backend, visibility_seconds=30)
    info = await backend.queues.state(TYPE, "q")
    assert (info.state, info.attempt, info.max_attempts) == ("processing", 1, 4)
    assert info.deadline is not None and abs(info.deadline - r.deadline) < 0.01
    await backend.queues.nack(TYPE, "q", r.token, delay_seconds=30, error="later")
    info = await backend.queues.state(TYPE, "q")
    assert (info.state, info.last_error) == ("scheduled", "later")
    await backend.queues.cancel(TYPE, "q")
    info = await backend.queues.state(TYPE, "q")
    assert info.state == "cancelled"
    assert info.finished_at is not None


async def test_cancel_queued_and_scheduled(backend: Backend, frozen: ManualClock) -> None:
    await push(backend, "q1", "q2")
    await backend.queues.push(TYPE, [req("s", delay_seconds=0.1)])
    assert await backend.queues.cancel(TYPE, "q1") == "cancelled"
    assert await backend.queues.cancel(TYPE, "s") == "cancelled"
    assert await backend.queues.cancel(TYPE, "q1") == "not_found"
    d = await backend.queues.depths(TYPE)
    assert (d.normal, d.scheduled, d.counters.cancelled) == (1, 0, 2)
    frozen.advance(0.15)
    assert await reserve_ids(backend, k=5) == ["q2"]
    assert (await backend.queues.state(TYPE, "s")).state == "cancelled"


async def test_cancel_processing_flags_extend_and_ack_records_cancelled(
    backend: Backend,
) -> None:
    await push(backend, "p")
    r = await reserve_one(backend, visibility_seconds=30)
    assert await backend.queues.cancel(TYPE, "p") == "cancelling"
    assert (await backend.queues.state(TYPE, "p")).state == "processing"
    assert await backend.queues.extend(TYPE, "p", r.token, 30) == LeaseStatus.CANCELLED
    assert await backend.queues.extend(TYPE, "p", "stale", 30) == LeaseStatus.STALE
    assert await backend.queues.ack(TYPE, [("p", r.token)]) == [True]
    assert (await backend.queues.state(TYPE, "p")).state == "cancelled"
    c = (await backend.queues.depths(TYPE)).counters
    assert (c.cancelled, c.completed) == (1, 0)


async def test_cancelled_processing_task_released_is_not_redelivered(backend: Backend) -> None:
    await push(backend, "p")
    r = await reserve_one(backend)
    assert await backend.queues.cancel(TYPE, "p") == "cancelling"
    assert await backend.queues.release(TYPE, "p", r.token)
    assert await backend.queues.reserve(TYPE, k=5) == []
    assert (await backend.queues.state(TYPE, "p")).state == "cancelled"


async def test_cancel_dead_done_unknown_is_not_found(backend: Backend) -> None:
    await push(backend, "done", "dead")
    got = {r.body.id: r for r in await backend.queues.reserve(TYPE, k=2)}
    await backend.queues.ack(TYPE, [("done", got["done"].token)])
    await backend.queues.nack(TYPE, "dead", got["dead"].token, delay_seconds=0, dead=True)
    assert await backend.queues.cancel(TYPE, "done") == "not_found"
    assert await backend.queues.cancel(TYPE, "dead") == "not_found"
    assert await backend.queues.cancel(TYPE, "unknown") == "not_found"
    assert (await backend.queues.depths(TYPE)).counters.cancelled == 0


# ------------------------------------------------------------ push rules
async def test_idempotency_key_dedupes(backend: Backend) -> None:
    first = await backend.queues.push_one(TYPE, req("a", idempotency_key="k1"))
    assert (first.task_id, first.queued, first.duplicate) == ("a", True, False)
    again = await backend.queues.push_one(TYPE, req("b", idempotency_key="k1"))
    assert (again.task_id, again.queued, again.duplicate) == ("a", False, True)
    other = await backend.queues.push_one(TYPE, req("c", idempotency_key="k2"))
    assert other.queued
    d = await backend.queues.depths(TYPE)
    assert (d.normal, d.counters.submitted) == (2, 2)
    # Keys are per type.
    assert (await backend.queues.push_one("other-type", req("z", idempotency_key="k1"))).queued


async def test_idempotency_key_holds_after_task_finished(backend: Backend) -> None:
    await backend.queues.push_one(TYPE, req("a", idempotency_key="k"))
    r = await reserve_one(backend)
    await backend.queues.ack(TYPE, [("a", r.token)])
    dup = await backend.queues.push_one(TYPE, req("b", idempotency_key="k"))
    assert (dup.task_id, dup.duplicate) == ("a", True)


async def test_idempotency_key_expires(backend: Backend, frozen: ManualClock) -> None:
    await backend.queues.push_one(TYPE, req("a", idempotency_key="k", idempotency_ttl=0.2))
    await elapse(backend, frozen, 0.3)
    res = await backend.queues.push_one(TYPE, req("b", idempotency_key="k", idempotency_ttl=0.2))
    assert (res.task_id, res.queued) == ("b", True)


async def test_concurrent_pushes_with_one_key_queue_exactly_one(backend: Backend) -> None:
    results = await asyncio.gather(
        *(backend.queues.push_one(TYPE, req(f"t{i}", idempotency_key="same")) for i in range(25))
    )
    queued = [r for r in results if r.queued]
    assert len(queued) == 1
    assert {r.task_id for r in results} == {queued[0].task_id}
    assert all(r.duplicate for r in results if not r.queued)
    assert (await backend.queues.depths(TYPE)).normal == 1


async def test_duplicate_task_id_is_refused_while_live(backend: Backend) -> None:
    await push(backend, "a")
    dup = await backend.queues.push_one(TYPE, req("a"))
    assert (dup.task_id, dup.queued, dup.duplicate) == ("a", False, True)
    r = await reserve_one(backend)
    assert (await backend.queues.push_one(TYPE, req("a"))).duplicate
    await backend.queues.nack(TYPE, "a", r.token, delay_seconds=30)
    assert (await backend.queues.push_one(TYPE, req("a"))).duplicate
    assert (await backend.queues.depths(TYPE)).counters.submitted == 1


async def test_push_many_in_order_with_per_request_results(backend: Backend) -> None:
    requests = [
        req("a"),
        req("b", idempotency_key="k"),
        req("c", idempotency_key="k"),
        req("a"),
        PushRequest(body("d", priority=1), delay_seconds=0),
        req("e", delay_seconds=30),
    ]
    results = await backend.queues.push(TYPE, requests)
    assert [(r.task_id, r.queued, r.duplicate) for r in results] == [
        ("a", True, False),
        ("b", True, False),
        ("b", False, True),
        ("a", False, True),
        ("d", True, False),
        ("e", True, False),
    ]
    assert await reserve_ids(backend, k=10) == ["d", "a", "b"]
    assert (await backend.queues.depths(TYPE)).scheduled == 1


async def test_push_many_wakes_several_reservers(backend: Backend) -> None:
    waiters = [asyncio.create_task(backend.queues.reserve(TYPE, timeout=10.0)) for _ in range(3)]
    await blocked(backend, 3)
    await push(backend, "a", "b", "c")
    got = await asyncio.wait_for(asyncio.gather(*waiters), 10.5)
    assert sorted(r.body.id for rs in got for r in rs) == ["a", "b", "c"]


# ------------------------------------------------------------ purge
async def test_purge_type_removes_everything_of_the_type(backend: Backend) -> None:
    await push(backend, "q", priority=1)
    await push(backend, "p")
    await backend.queues.push(TYPE, [req("s", delay_seconds=30), req("i", idempotency_key="k")])
    await push(backend, "d")
    got = {r.body.id: r for r in await backend.queues.reserve(TYPE, k=2)}
    assert set(got) == {"q", "p"}
    dead = await reserve_one(backend)  # "i", dead-lettered next
    await backend.queues.nack(TYPE, dead.body.id, dead.token, delay_seconds=0, dead=True)
    await backend.streams.push(TYPE, {"x": 1}, worker_id="w1")
    await backend.catalog.put(TYPE, {"config": {}})
    await backend.configs.set(TYPE, {"slots": 2})
    await backend.configs.set(TYPE, {"slots": 3}, worker_id="w1")
    await backend.workers.register(TYPE, "w1", {"host": "h"})
    await backend.configs.put_desired(
        TYPE, "w1", {"slots": 3}, await backend.configs.next_generation(TYPE)
    )
    await push(backend, "other", type_="other-type")
    await backend.workers.register("other-type", "w1", {"host": "h"})

    await backend.purge_type(TYPE)

    d = await backend.queues.depths(TYPE)
    assert (d.pending, d.processing, d.scheduled, d.dead) == (0, 0, 0, 0)
    assert d.counters.submitted == 0
    for tid in ("q", "p", "s", "i", "d"):
        assert (await backend.queues.state(TYPE, tid)).state == "unknown"
    assert await backend.queues.ack(TYPE, [("p", got["p"].token)]) == [False]
    assert await backend.streams.length(TYPE) == 0
    assert await backend.catalog.get(TYPE) is None
    assert await backend.configs.get(TYPE) == {}
    assert await backend.configs.get(TYPE, "w1") == {}
    assert await backend.workers.ids(TYPE) == []
    assert await backend.workers.get(TYPE, "w1") is None
    assert await backend.workers.all() == [("other-type", "w1")]
    # The idempotency key is gone too.
    assert (await backend.queues.push_one(TYPE, req("i2", idempotency_key="k"))).queued
    # Other types are untouched.
    assert await reserve_ids(backend, type_="other-type") == ["other"]
