"""Conformance: run budgets, pause and resume (docs/costs.md) on every backend.

The step that adds a run's meters past a cap of its budget pauses it; a paused run's
queued tasks are not delivered (a reserve parks them: still queued, nothing charged);
resume queues them again; cancel, the end rule, pushes and groups hold while paused.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from fleet.backends.base import Backend
from fleet.core.errors import ContractValueError, UnsupportedBackend
from fleet.core.meters import MeterBatch, run_scope
from fleet.core.records import PushRequest, TaskBody, new_id, now
from fleet.core.runs import callback_task_id
from tests.conformance.helpers import TYPE

CB = "budget-callback"


@pytest.fixture
async def rb(backend: Backend) -> AsyncIterator[Backend]:
    try:
        await backend.runs.page()
    except UnsupportedBackend:
        pytest.skip("runs are not supported on this backend")
    yield backend


async def push(b: Backend, run: str, *ids: str, **kw: Any) -> None:
    reqs = [
        PushRequest(TaskBody(id=i, payload={"i": i}, enqueued_at=now(), run=run, **kw)) for i in ids
    ]
    results = await b.queues.push(TYPE, reqs)
    assert all(r.queued for r in results), results


async def spend(b: Backend, run: str, **meters: float) -> None:
    batch = MeterBatch()
    for name, amount in meters.items():
        batch.add([run_scope(run)], name, amount)
    await b.meters.add(batch)


async def state(b: Backend, run: str) -> str:
    rec = await b.runs.get(run)
    assert rec is not None
    return rec.state


async def test_budget_is_checked_and_kept(rb: Backend) -> None:
    run = await rb.runs.create(budget={"spend": 50, "bytes": 5e9, "solver_calls": 1000})
    rec = await rb.runs.get(run)
    assert rec is not None and rec.budget == {"bytes": 5e9, "solver_calls": 1000.0, "spend": 50.0}
    assert rec.to_dict()["budget"] == rec.budget and rec.paused_reason is None
    for bad in ({}, {"spend": 0}, {"spend": -1}, {"Bad Name": 1}, {"spend": "x"}, [1]):
        with pytest.raises(ContractValueError):
            await rb.runs.create(budget=bad)  # type: ignore[arg-type]


async def test_meters_past_a_cap_pause_the_run_and_its_tasks_wait(rb: Backend) -> None:
    run = await rb.runs.create(budget={"bytes": 1000})
    await push(rb, run, "a", "b", "c", "d")
    first = await rb.queues.reserve(TYPE, k=1, visibility_seconds=30)
    assert [r.body.id for r in first] == ["a"]
    await spend(rb, run, bytes_received=600)
    assert await state(rb, run) == "running"
    await spend(rb, run, bytes_sent=400)  # 1000 of 1000: the cap is reached
    rec = await rb.runs.get(run)
    assert rec is not None and rec.state == "paused"
    assert rec.paused_reason == "budget reached: bytes 1000 of 1000"
    assert rec.paused_at is not None
    # Nothing more is delivered; what was taken is set aside, still queued, uncharged.
    assert await rb.queues.reserve(TYPE, k=10, visibility_seconds=30) == []
    assert await rb.queues.reserve(TYPE, k=10, visibility_seconds=30) == []
    for task_id in ("b", "c", "d"):
        info = await rb.queues.state(TYPE, task_id)
        assert info.state == "queued" and info.attempt == 0, info
    assert rec.counters["pending"] == 3 and rec.counters["running"] == 1
    # The running one finishes; the run stays paused with its tasks.
    await rb.queues.ack(TYPE, [("a", first[0].token)])
    assert await state(rb, run) == "paused"
    # Resume without raising: delivered again (the next add past the cap pauses again).
    resumed = await rb.runs.resume(run, budget={"bytes": 10_000})
    assert resumed is not None and resumed.state == "running"
    assert resumed.budget == {"bytes": 10_000.0} and resumed.paused_reason is None
    got = await rb.queues.reserve(TYPE, k=10, visibility_seconds=30)
    assert sorted(r.body.id for r in got) == ["b", "c", "d"]
    assert all(r.body.attempt == 1 for r in got)


async def test_manual_pause_resume_keeps_every_task_and_the_callback_runs_once(
    rb: Backend,
) -> None:
    run = await rb.runs.create(on_complete={"type": CB, "payload": {}})
    await push(rb, run, *[f"t{i}" for i in range(6)])
    paused = await rb.runs.pause(run, "checking the parser")
    assert paused is not None and paused.state == "paused"
    assert paused.paused_reason == "checking the parser"
    assert await rb.runs.pause(run) == await rb.runs.get(run)  # again: answered as it is
    assert await rb.queues.reserve(TYPE, k=3, visibility_seconds=30) == []
    # Pushes still join it (a crawl's running pages discover links while paused).
    await push(rb, run, "late")
    assert await rb.queues.reserve(TYPE, k=10, visibility_seconds=30) == []
    rec = await rb.runs.get(run)
    assert rec is not None and rec.counters["pending"] == 7 and rec.counters["submitted"] == 7
    assert await rb.queues.reserve(CB, k=1) == []
    await rb.runs.resume(run)
    done: list[str] = []
    while len(done) < 7:
        got = await rb.queues.reserve(TYPE, k=10, visibility_seconds=30)
        assert got, done
        await rb.queues.ack(TYPE, [(r.body.id, r.token) for r in got])
        done += [r.body.id for r in got]
    assert sorted(done) == sorted([f"t{i}" for i in range(6)] + ["late"])
    assert await state(rb, run) == "done"
    callbacks = await rb.queues.reserve(CB, k=5)
    assert [c.body.id for c in callbacks] == [callback_task_id(run)]


async def test_a_paused_run_with_nothing_left_ends_done(rb: Backend) -> None:
    run = await rb.runs.create(budget={"attempts": 1}, on_complete={"type": CB})
    await push(rb, run, "only")
    got = await rb.queues.reserve(TYPE, k=1, visibility_seconds=30)
    await spend(rb, run, attempts=1)
    assert await state(rb, run) == "paused"
    await rb.queues.ack(TYPE, [("only", got[0].token)])
    assert await state(rb, run) == "done"
    assert [c.body.id for c in await rb.queues.reserve(CB, k=5)] == [callback_task_id(run)]


async def test_cancel_of_a_paused_run_cancels_its_parked_tasks(rb: Backend) -> None:
    run = await rb.runs.create()
    await push(rb, run, "x", "y", "z")
    await rb.runs.pause(run)
    assert await rb.queues.reserve(TYPE, k=2, visibility_seconds=30) == []  # parks x, y
    cancelled = await rb.runs.cancel(run)
    assert cancelled is not None and cancelled.record.state == "cancelled"
    assert cancelled.record.counters["cancelled"] == 3
    assert cancelled.record.counters["pending"] == 0
    for task_id in ("x", "y", "z"):
        assert (await rb.queues.state(TYPE, task_id)).state == "cancelled"
    # Resuming an ended run changes nothing; nothing of it is ever delivered.
    again = await rb.runs.resume(run)
    assert again is not None and again.state == "cancelled"
    assert await rb.queues.reserve(TYPE, k=5, visibility_seconds=30) == []


async def test_a_parked_task_cancelled_alone_never_comes_back(rb: Backend) -> None:
    run = await rb.runs.create()
    await push(rb, run, "keep", "drop")
    await rb.runs.pause(run)
    assert await rb.queues.reserve(TYPE, k=5, visibility_seconds=30) == []
    assert await rb.queues.cancel(TYPE, "drop") == "cancelled"
    await rb.runs.resume(run)
    got = await rb.queues.reserve(TYPE, k=5, visibility_seconds=30)
    assert [r.body.id for r in got] == ["keep"]


async def test_grouped_tasks_of_a_paused_run_wait_and_come_back(rb: Backend) -> None:
    run = await rb.runs.create()
    await push(rb, run, "g1", "g2", group="example.com")
    other = new_id()
    await rb.queues.push(TYPE, [PushRequest(TaskBody(id=other, payload={}, enqueued_at=now()))])
    await rb.runs.pause(run)
    got = await rb.queues.reserve(TYPE, k=5, visibility_seconds=30)
    assert [r.body.id for r in got] == [other]  # a task of no run is not held back
    assert await rb.queues.reserve(TYPE, k=5, visibility_seconds=30) == []
    await rb.runs.resume(run)
    got = await rb.queues.reserve(TYPE, k=5, visibility_seconds=30)
    assert sorted(r.body.id for r in got) == ["g1", "g2"]


async def test_pause_and_resume_of_unknown_runs(rb: Backend) -> None:
    assert await rb.runs.pause(new_id()) is None
    assert await rb.runs.resume(new_id()) is None
    assert await rb.runs.pause("not-a-run") is None
    run = await rb.runs.create()
    with pytest.raises(ContractValueError):
        await rb.runs.pause(run, "")
    with pytest.raises(ContractValueError):
        await rb.runs.resume(run, budget={"spend": -5})


async def pending_ids(b: Backend, run: str | None = None, limit: int = 2) -> list[str]:
    """Every pending task the task browser lists, page by page, newest first."""
    out: list[str] = []
    cursor: str | None = None
    while True:
        page = await b.browse.page(TYPE, "pending", limit, cursor, run)
        out += [t.id for t in page.items]
        if page.next_cursor is None:
            return out
        cursor = page.next_cursor


async def test_the_task_browser_lists_a_paused_runs_parked_tasks_as_pending(rb: Backend) -> None:
    other = await rb.runs.create()
    run = await rb.runs.create()
    await push(rb, other, "o1")
    await push(rb, run, "p1", "p2", "p3")
    await push(rb, other, "o2")
    await rb.runs.pause(run, "looking")
    # The reserve parks the paused run's tasks it meets and delivers the others.
    got = await rb.queues.reserve(TYPE, k=10, visibility_seconds=30)
    assert sorted(r.body.id for r in got) == ["o1", "o2"]
    await push(rb, other, "o3")
    # Parked and queued tasks together, newest first, across pages of two.
    assert await pending_ids(rb) == ["o3", "p3", "p2", "p1"]
    assert await pending_ids(rb, run) == ["p3", "p2", "p1"]
    assert await pending_ids(rb, other) == ["o3"]
    await rb.runs.resume(run)
    assert await pending_ids(rb) == ["o3", "p3", "p2", "p1"]
