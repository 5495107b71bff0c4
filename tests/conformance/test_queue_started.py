"""Conformance: start marks, and what a sweep charges for a lease lost with its worker.

A reservation marked started (``mark_started``) that expires keeps its attempt
charged: the task ran when its worker was lost. One never marked started died
unstarted (prefetched, or beside a task that killed the process): its attempt is
refunded, up to ``max(max_attempts, 2)`` refunds, after which the losses are charged
again so that a task killing its process before its mark lands still reaches the DLQ.
"""

from __future__ import annotations

from fleet.backends.base import Backend
from fleet.core.clock import ManualClock
from fleet.core.records import Reservation

from .helpers import TYPE, push, reserve_one

#: Lease length of the reservations these tests let run out.
LOST = 0.05


async def lose(backend: Backend, frozen: ManualClock, *, started: bool) -> Reservation:
    """Reserve the head task, mark it started or not, and let its worker "die"."""
    r = await reserve_one(backend, visibility_seconds=LOST)
    if started:
        assert await backend.queues.mark_started(TYPE, [(r.body.id, r.token)]) == [True]
    frozen.advance(LOST * 2)
    assert await backend.queues.sweep(TYPE) == 1
    return r


async def test_unstarted_lost_reservation_gets_its_attempt_back(
    backend: Backend, frozen: ManualClock
) -> None:
    await push(backend, "a", max_attempts=2)
    for n in (1, 2):
        r = await lose(backend, frozen, started=False)
        assert (r.body.attempt, r.body.refunds) == (1, n - 1)
        info = await backend.queues.state(TYPE, "a")
        assert (info.state, info.attempt) == ("queued", 0)
    # Lost max_attempts times without ever running: still deliverable, not dead.
    r = await reserve_one(backend)
    assert (r.body.attempt, r.body.refunds, r.body.max_attempts) == (1, 2, 2)
    assert await backend.queues.ack(TYPE, [("a", r.token)]) == [True]
    assert await backend.queues.dead_peek(TYPE) == []
    assert (await backend.queues.state(TYPE, "a")).state == "done"


async def test_started_lost_reservation_stays_charged(
    backend: Backend, frozen: ManualClock
) -> None:
    await push(backend, "a", max_attempts=3)
    await lose(backend, frozen, started=True)
    r = await reserve_one(backend)
    assert (r.body.attempt, r.body.refunds) == (2, 0)


async def test_refund_cap_charges_again_and_dead_letters(
    backend: Backend, frozen: ManualClock
) -> None:
    await push(backend, "poison", max_attempts=2)
    deliveries = []
    for _ in range(4):  # 2 refunded losses, then 2 charged ones
        deliveries.append(await lose(backend, frozen, started=False))
    assert [(r.body.attempt, r.body.refunds) for r in deliveries] == [
        (1, 0),
        (1, 1),
        (1, 2),
        (2, 2),
    ]
    assert await backend.queues.reserve(TYPE, k=5) == []  # attempt 3 > 2: dead-lettered
    (dead,) = await backend.queues.dead_peek(TYPE)
    assert dead.id == "poison"
    assert dead.refunds == 2
    assert dead.last_error is not None and "exceeds max_attempts=2" in dead.last_error
    assert (await backend.queues.state(TYPE, "poison")).state == "dead"
    assert (await backend.queues.depths(TYPE)).counters.dead == 1


async def test_a_single_attempt_task_gets_two_refunds(
    backend: Backend, frozen: ManualClock
) -> None:
    await push(backend, "one", max_attempts=1)
    for _ in range(2):
        await lose(backend, frozen, started=False)
    r = await lose(backend, frozen, started=False)  # the cap (2) reached: charged
    assert (r.body.attempt, r.body.refunds) == (1, 2)
    assert await backend.queues.reserve(TYPE) == []
    assert [(b.id, b.attempt, b.refunds) for b in await backend.queues.dead_peek(TYPE)] == [
        ("one", 1, 2)
    ]


async def test_a_mark_belongs_to_one_reservation(backend: Backend, frozen: ManualClock) -> None:
    await push(backend, "a", max_attempts=3)
    await lose(backend, frozen, started=True)  # charged: attempt 1 was made
    await lose(backend, frozen, started=False)  # the next lease was not marked: refunded
    r = await reserve_one(backend)
    assert (r.body.attempt, r.body.refunds) == (2, 1)


async def test_stale_tokens_cannot_mark(backend: Backend, frozen: ManualClock) -> None:
    await push(backend, "a", "b", max_attempts=3)
    old = await lose(backend, frozen, started=False)
    fresh = await reserve_one(backend, visibility_seconds=LOST)
    assert fresh.body.id == "a"
    assert await backend.queues.mark_started(
        TYPE, [("a", old.token), ("a", "nope"), ("zz", "t")]
    ) == [
        False,
        False,
        False,
    ]
    # The stale marks left the current reservation unmarked: its loss is refunded.
    frozen.advance(LOST * 2)
    assert await backend.queues.sweep(TYPE) == 1
    again = await reserve_one(backend)
    assert (again.body.id, again.body.attempt, again.body.refunds) == ("a", 1, 2)
    # A finished lease cannot be marked either; a batch answers per lease.
    other = await reserve_one(backend)
    assert await backend.queues.ack(TYPE, [("a", again.token)]) == [True]
    leases = [("a", again.token), ("b", other.token), ("b", other.token)]
    assert await backend.queues.mark_started(TYPE, leases) == [False, True, True]
    assert await backend.queues.mark_started(TYPE, []) == []


async def test_release_is_not_a_refund(backend: Backend, frozen: ManualClock) -> None:
    await push(backend, "a", max_attempts=3)
    r = await reserve_one(backend)
    assert await backend.queues.mark_started(TYPE, [("a", r.token)]) == [True]
    assert await backend.queues.release(TYPE, "a", r.token)
    r = await reserve_one(backend, visibility_seconds=LOST)
    assert (r.body.attempt, r.body.refunds) == (1, 0)
    # The released lease's mark went with it: this one is unmarked, so refunded.
    frozen.advance(LOST * 2)
    assert await backend.queues.sweep(TYPE) == 1
    r = await reserve_one(backend)
    assert (r.body.attempt, r.body.refunds) == (1, 1)


async def test_refunds_survive_retries_and_replay_resets_them(
    backend: Backend, frozen: ManualClock
) -> None:
    await push(backend, "a", max_attempts=2)
    await lose(backend, frozen, started=False)
    r = await reserve_one(backend)
    assert await backend.queues.nack(TYPE, "a", r.token, delay_seconds=0, error="e1") == "retry"
    r = await reserve_one(backend, timeout=1.0)
    assert (r.body.attempt, r.body.refunds) == (2, 1)
    assert await backend.queues.nack(TYPE, "a", r.token, delay_seconds=0, error="e2") == "dead"
    (dead,) = await backend.queues.dead_peek(TYPE)
    assert (dead.attempt, dead.refunds, dead.last_error) == (2, 1, "e2")
    assert await backend.queues.dead_replay(TYPE) == 1
    r = await reserve_one(backend)
    assert (r.body.attempt, r.body.refunds) == (1, 0)


async def test_a_marked_lease_is_settled_as_before(backend: Backend, frozen: ManualClock) -> None:
    await push(backend, "a", "b", max_attempts=3)
    ra, rb = await backend.queues.reserve(TYPE, k=2)
    marks = [("a", ra.token), ("b", rb.token)]
    assert await backend.queues.mark_started(TYPE, marks) == [True, True]
    assert await backend.queues.ack(TYPE, [("a", ra.token)]) == [True]
    assert await backend.queues.nack(TYPE, "b", rb.token, delay_seconds=0) == "retry"
    rb2 = await reserve_one(backend, timeout=1.0, visibility_seconds=LOST)
    assert (rb2.body.id, rb2.body.attempt) == ("b", 2)
    # The nacked lease's mark ended with it: the retry's lease is unmarked.
    frozen.advance(LOST * 2)
    assert await backend.queues.sweep(TYPE) == 1
    r = await reserve_one(backend)
    assert (r.body.attempt, r.body.refunds) == (2, 1)
