"""Conformance: a task's record keeps its attempts (worker, started, ended, outcome,
error), and ``started_at`` is right in every state, dead included (issue 42, item 3)."""

from __future__ import annotations

from fleet.backends.base import Backend
from fleet.core.attempts import ATTEMPTS_KEPT, ERROR_CHARS
from fleet.core.clock import ManualClock
from fleet.core.records import now

from .helpers import TYPE, elapse, push, reserve_one


def _rows(info: object) -> list[tuple[object, ...]]:
    return [
        (a.number, a.worker, a.outcome, a.error)
        for a in info.attempts  # type: ignore[attr-defined]
    ]


async def test_each_attempt_is_kept_with_its_worker_and_outcome(
    backend: Backend, frozen: ManualClock
) -> None:
    await push(backend, "t1", max_attempts=3)
    # attempt 1 on w/1 fails and is retried
    r = await reserve_one(backend)
    assert await backend.queues.mark_started(TYPE, [("t1", r.token)], worker_id="w/1") == [True]
    first_start = now()
    info = await backend.queues.state(TYPE, "t1")
    assert _rows(info) == [(1, "w/1", "running", None)]
    assert info.attempts[0].started_at == first_start
    frozen.advance(2)
    await backend.queues.nack(
        TYPE, "t1", r.token, delay_seconds=0, error="boom one", worker_id="w/1",
        started_at=first_start,
    )  # fmt: skip
    info = await backend.queues.state(TYPE, "t1")
    assert info.state == "scheduled"
    assert _rows(info) == [(1, "w/1", "failed", "boom one")]
    assert info.attempts[0].ended_at == first_start + 2
    # attempt 2 on w2 finishes it
    frozen.advance(1)
    r = await reserve_one(backend)
    await backend.queues.mark_started(TYPE, [("t1", r.token)], worker_id="w2")
    second_start = now()
    frozen.advance(3)
    assert await backend.queues.ack(TYPE, [("t1", r.token)], worker_id="w2") == [True]
    info = await backend.queues.state(TYPE, "t1")
    assert info.state == "done"
    assert _rows(info) == [(1, "w/1", "failed", "boom one"), (2, "w2", "done", None)]
    assert info.attempts[1].started_at == second_start
    assert info.attempts[1].ended_at == info.finished_at == second_start + 3
    assert info.started_at == second_start
    assert info.to_dict()["attempts"][1]["outcome"] == "done"


async def test_a_dead_task_keeps_its_attempts_and_its_start(
    backend: Backend, frozen: ManualClock
) -> None:
    await push(backend, "t2", max_attempts=2)
    starts = []
    for n in (1, 2):
        r = await reserve_one(backend)
        starts.append(now())
        frozen.advance(1)
        # no start mark: the nack says when it started and where
        outcome = await backend.queues.nack(
            TYPE, "t2", r.token, delay_seconds=0, error=f"err {n}" + "x" * 400,
            worker_id="wk", started_at=starts[-1],
        )  # fmt: skip
        assert outcome == ("retry" if n == 1 else "dead")
    info = await backend.queues.state(TYPE, "t2")
    assert info.state == "dead"
    assert [(a.number, a.outcome) for a in info.attempts] == [(1, "failed"), (2, "dead")]
    assert info.started_at == starts[1]  # not "—"
    assert all(len(a.error or "") == ERROR_CHARS for a in info.attempts)
    assert info.last_error is not None and len(info.last_error) > ERROR_CHARS  # kept whole
    (letter,) = [b for b in await backend.queues.dead_peek(TYPE) if b.id == "t2"]
    assert len(letter.attempts) == 2


async def test_a_lost_attempt_is_kept_and_an_unstarted_one_is_not(
    backend: Backend, frozen: ManualClock
) -> None:
    await push(backend, "t3", max_attempts=5)
    r = await reserve_one(backend, visibility_seconds=10)
    await backend.queues.mark_started(TYPE, [("t3", r.token)], worker_id="gone")
    await elapse(backend, frozen, 11)
    assert await backend.queues.sweep(TYPE) == 1
    info = await backend.queues.state(TYPE, "t3")
    assert _rows(info) == [(1, "gone", "lost", None)]
    # reserved but never started, then lost: refunded, not an attempt
    r = await reserve_one(backend, visibility_seconds=10)
    await elapse(backend, frozen, 11)
    assert await backend.queues.sweep(TYPE) == 1
    info = await backend.queues.state(TYPE, "t3")
    assert _rows(info) == [(1, "gone", "lost", None)]
    assert info.attempt == 1


async def test_attempts_are_bounded(backend: Backend, frozen: ManualClock) -> None:
    await push(backend, "t4", max_attempts=ATTEMPTS_KEPT + 5)
    for _ in range(ATTEMPTS_KEPT + 3):
        r = await reserve_one(backend)
        frozen.advance(1)
        await backend.queues.nack(TYPE, "t4", r.token, delay_seconds=0, error="e")
    info = await backend.queues.state(TYPE, "t4")
    assert [a.number for a in info.attempts] == list(range(4, ATTEMPTS_KEPT + 4))
