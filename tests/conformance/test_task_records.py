"""Conformance: a task's record (issue 26, 2 and 3).

``task_state`` answers, beside the state, when the task was submitted and its
latest attempt started, its latest progress report, and the outputs it emitted
(the newest 100, each with its stream entry id and attempt); finished records
are kept ``FLEET_RESULT_TTL_SECONDS`` and at most ``FLEET_RESULT_MAX_PER_TYPE``
per type. The same on every backend.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core.clock import ManualClock
from fleet.core.records import dumps, now
from fleet.core.results import RECORD_MAX_OUTPUTS, RECORD_OUTPUT_MAX_BYTES, progress_topic

from .helpers import SHORT, TYPE, elapse, push, reserve_one


async def emit(backend: Backend, task_id: str, attempt: int, n: int) -> str:
    entry = await backend.streams.push(
        TYPE, {"n": n}, worker_id="w1", task_id=task_id, attempt=attempt
    )
    return entry.id


async def test_record_of_a_done_task(backend: Backend) -> None:
    before = now()
    await push(backend, "a")
    r = await reserve_one(backend)
    assert await backend.queues.mark_started(TYPE, [("a", r.token)]) == [True]
    ids = [await emit(backend, "a", 1, n) for n in range(3)]
    await backend.streams.progress(TYPE, "a", attempt=1, fraction=0.5, message="step 2/4")
    running = await backend.queues.state(TYPE, "a")
    assert running.state == "processing"
    assert running.progress is not None and running.progress["fraction"] == 0.5
    assert await backend.queues.ack(TYPE, [("a", r.token)]) == [True]

    info = await backend.queues.state(TYPE, "a")
    assert info.state == "done" and info.attempt == 1
    assert info.submitted_at is not None and before - 1 <= info.submitted_at <= now()
    assert info.started_at is not None and info.submitted_at <= info.started_at
    assert info.finished_at is not None and info.started_at <= info.finished_at
    assert info.progress is not None
    assert (info.progress["fraction"], info.progress["message"]) == (0.5, "step 2/4")
    assert info.progress["attempt"] == 1
    assert [o["id"] for o in info.outputs] == ids
    assert [o["payload"] for o in info.outputs] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert {o["attempt"] for o in info.outputs} == {1}
    assert info.outputs_total == 3
    d = info.to_dict()
    assert d["outputs_truncated"] is False
    assert d["outputs"][0]["id"] == ids[0] and d["progress"]["message"] == "step 2/4"


async def test_redelivered_outputs_tell_their_attempts_apart(
    backend: Backend, frozen: ManualClock
) -> None:
    await push(backend, "a", max_attempts=3)
    first = await reserve_one(backend, visibility_seconds=SHORT)
    assert await backend.queues.mark_started(TYPE, [("a", first.token)]) == [True]
    await emit(backend, "a", first.body.attempt, 1)
    frozen.advance(SHORT * 2)  # the worker is lost; the lease runs out
    assert await backend.queues.sweep(TYPE) == 1
    second = await reserve_one(backend)
    assert second.body.attempt == 2
    await emit(backend, "a", second.body.attempt, 1)
    await emit(backend, "a", second.body.attempt, 2)
    assert await backend.queues.ack(TYPE, [("a", second.token)]) == [True]
    info = await backend.queues.state(TYPE, "a")
    assert [(o["attempt"], o["payload"]["n"]) for o in info.outputs] == [(1, 1), (2, 1), (2, 2)]
    # A consumer keeps the final attempt's outputs only.
    final = [o for o in info.outputs if o["attempt"] == info.attempt]
    assert len(final) == 2


async def test_dead_task_keeps_its_record(backend: Backend) -> None:
    await push(backend, "a", max_attempts=1)
    r = await reserve_one(backend)
    await emit(backend, "a", 1, 7)
    await backend.streams.progress(TYPE, "a", attempt=1, fraction=None, message="stuck")
    outcome = await backend.queues.nack(
        TYPE, "a", r.token, delay_seconds=0, error="Boom: no", traceback=None
    )
    assert outcome == "dead"
    info = await backend.queues.state(TYPE, "a")
    assert info.state == "dead" and info.last_error == "Boom: no"
    assert info.finished_at is not None
    assert [o["payload"] for o in info.outputs] == [{"n": 7}]
    assert info.progress is not None and info.progress["message"] == "stuck"
    assert info.progress["fraction"] is None


async def test_outputs_keep_the_newest_hundred(backend: Backend) -> None:
    await push(backend, "a")
    r = await reserve_one(backend)
    for n in range(RECORD_MAX_OUTPUTS + 5):
        await emit(backend, "a", 1, n)
    assert await backend.queues.ack(TYPE, [("a", r.token)]) == [True]
    info = await backend.queues.state(TYPE, "a")
    assert len(info.outputs) == RECORD_MAX_OUTPUTS
    assert info.outputs[0]["payload"] == {"n": 5}
    assert info.outputs[-1]["payload"] == {"n": RECORD_MAX_OUTPUTS + 4}
    assert info.outputs_total == RECORD_MAX_OUTPUTS + 5


async def test_big_outputs_are_kept_as_markers(backend: Backend) -> None:
    """An output over the record's byte cap is a marker in the record (its size,
    ``truncated``), whole in the output stream; small ones beside it stay whole."""
    await push(backend, "a")
    r = await reserve_one(backend)
    big = {"blob": "x" * (RECORD_OUTPUT_MAX_BYTES + 10)}
    edge = {"blob": "é" * ((RECORD_OUTPUT_MAX_BYTES - 12) // 2)}  # ~cap in UTF-8 bytes
    for payload in ({"n": 1}, big, edge, {"n": 2}):
        await backend.streams.push(TYPE, payload, worker_id="w1", task_id="a", attempt=1)
    assert await backend.queues.ack(TYPE, [("a", r.token)]) == [True]
    info = await backend.queues.state(TYPE, "a")
    assert [o["payload"] for o in info.outputs] == [{"n": 1}, None, edge, {"n": 2}]
    marker = info.outputs[1]
    assert marker["truncated"] is True
    assert marker["bytes"] == len(dumps(big).encode())
    assert info.outputs_total == 4
    assert info.to_dict()["outputs_truncated"] is True
    assert [e.payload for e in await backend.streams.peek(TYPE, 10)][1] == big


async def test_a_record_holds_a_bounded_size(backend: Backend) -> None:
    """100 emits of 100 KB leave a record of markers, not of 10 MB."""
    await push(backend, "a")
    await reserve_one(backend)
    blob = {"blob": "y" * 100_000}
    for _ in range(RECORD_MAX_OUTPUTS):
        await backend.streams.push(TYPE, blob, worker_id="w1", task_id="a", attempt=1)
    info = await backend.queues.state(TYPE, "a")
    assert len(dumps(info.to_dict())) < RECORD_MAX_OUTPUTS * (RECORD_OUTPUT_MAX_BYTES + 200)
    assert all(o["truncated"] for o in info.outputs)
    assert info.to_dict()["outputs_truncated"] is True


async def test_emits_without_a_task_leave_no_record(backend: Backend) -> None:
    await backend.streams.push(TYPE, {"n": 1}, worker_id="w1")
    await push(backend, "a")
    info = await backend.queues.state(TYPE, "a")
    assert info.state == "queued" and info.outputs == () and info.progress is None
    assert info.started_at is None and info.submitted_at is not None


async def test_progress_is_published(backend: Backend) -> None:
    await push(backend, "a")
    await reserve_one(backend)
    sub = await backend.events.subscribe(progress_topic(TYPE))
    try:
        await backend.streams.progress(TYPE, "a", attempt=1, fraction=0.25, message=None)
        topic, message = await asyncio.wait_for(sub.__anext__(), 5)
    finally:
        await sub.aclose()
    assert topic == progress_topic(TYPE)
    assert message["task_id"] == "a" and message["fraction"] == 0.25
    assert message["attempt"] == 1 and message["message"] is None


async def test_unknown_task_has_no_record(backend: Backend) -> None:
    info = await backend.queues.state(TYPE, "nope")
    assert info.state == "unknown" and info.outputs == () and info.submitted_at is None


@pytest.fixture
async def bounded(backend_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Backend]:
    """A backend opened with at most 3 finished records per type."""
    monkeypatch.setenv("FLEET_RESULT_MAX_PER_TYPE", "3")
    b = await open_backend(backend_url)
    try:
        yield b
    finally:
        await b.close()


async def test_finished_records_are_bounded_per_type(bounded: Backend) -> None:
    ids = [f"t{i}" for i in range(6)]
    for tid in ids:
        await push(bounded, tid)
        r = await reserve_one(bounded)
        await emit(bounded, tid, 1, 1)
        assert await bounded.queues.ack(TYPE, [(tid, r.token)]) == [True]
        await bounded.queues.sweep(TYPE)  # SQLite bounds the count in its sweep
    states = [(await bounded.queues.state(TYPE, tid)).state for tid in ids]
    assert states[-3:] == ["done"] * 3
    assert states[:3] == ["unknown"] * 3


@pytest.fixture
async def short_lived(backend_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Backend]:
    """A backend opened with finished records kept for one second."""
    monkeypatch.setenv("FLEET_RESULT_TTL_SECONDS", "1")
    b = await open_backend(backend_url)
    try:
        yield b
    finally:
        await b.close()


async def test_finished_records_expire_after_the_result_ttl(
    short_lived: Backend, frozen: ManualClock
) -> None:
    b = short_lived
    await push(b, "old")
    r = await reserve_one(b)
    await emit(b, "old", 1, 1)
    assert await b.queues.ack(TYPE, [("old", r.token)]) == [True]
    assert (await b.queues.state(TYPE, "old")).outputs_total == 1
    await elapse(b, frozen, 1.3)  # on Redis a finished bucket expires (EXPIRE)
    await push(b, "new")  # a later finish prunes what is past the ttl
    r = await reserve_one(b)
    assert await b.queues.ack(TYPE, [("new", r.token)]) == [True]
    await b.queues.sweep(TYPE)
    old = await b.queues.state(TYPE, "old")
    assert old.state == "unknown" and old.outputs == ()
    assert (await b.queues.state(TYPE, "new")).state == "done"
