"""Conformance: the task browser's ``done`` state (finished records, newest finished
first, walked by cursor) and its ``run`` filter on every state (issue 42, item 2)."""

from __future__ import annotations

from typing import Any

from fleet.backends.base import Backend
from fleet.core.capabilities.browse import TaskSummary
from fleet.core.clock import ManualClock
from fleet.core.records import PushRequest, TaskBody, now

from .helpers import TYPE, push, reserve_one


async def _walk(
    backend: Backend, state: str, limit: int, run: str | None = None
) -> list[TaskSummary]:
    """Every page of a walk (a filtered page may be short and still go on)."""
    out: list[TaskSummary] = []
    cursor: str | None = None
    for _ in range(10_000):
        page = await backend.browse.page(TYPE, state, limit, cursor, run=run)  # type: ignore[arg-type]
        assert len(page.items) <= limit
        out += page.items
        if page.next_cursor is None:
            return out
        cursor = page.next_cursor
    raise AssertionError("the walk did not end")


async def _push_in(backend: Backend, task_id: str, run: str) -> None:
    body = TaskBody(id=task_id, payload={"n": 1}, enqueued_at=now(), run=run)
    (result,) = await backend.queues.push(TYPE, [PushRequest(body)])
    assert result.queued, result


async def _finish(backend: Backend, frozen: ManualClock, n: int, **kw: Any) -> list[str]:
    """Reserve and ack ``n`` tasks one at a time, a second apart; ids in finish order."""
    done = []
    for _ in range(n):
        r = await reserve_one(backend, **kw)
        frozen.advance(1.0)
        assert await backend.queues.ack(TYPE, [(r.body.id, r.token)]) == [True]
        done.append(r.body.id)
    return done


async def test_done_lists_finished_tasks_newest_finished_first(
    backend: Backend, frozen: ManualClock
) -> None:
    # submitted in one order, finished in another: the page follows the finish
    await push(backend, *[f"d{i:02d}" for i in range(12)])
    finished = await _finish(backend, frozen, 12)
    await push(backend, "still-pending")
    first = await backend.browse.page(TYPE, "done", 5, None)
    assert [s.id for s in first.items] == finished[::-1][:5]
    assert all(s.state == "done" for s in first.items)
    assert first.items[0].finished_at == now()
    assert first.items[0].finished_at > first.items[1].finished_at  # type: ignore[operator]
    assert first.items[0].attempt == 1
    walked = await _walk(backend, "done", 5)
    assert [s.id for s in walked] == finished[::-1]


async def test_done_leaves_out_cancelled_and_dead(backend: Backend, frozen: ManualClock) -> None:
    await push(backend, "a", "b", "c", "gone")
    assert await backend.queues.cancel(TYPE, "gone") == "cancelled"
    r = await reserve_one(backend)
    await backend.queues.nack(TYPE, r.body.id, r.token, delay_seconds=0, error="x", dead=True)
    frozen.advance(1)
    done = await _finish(backend, frozen, 2)
    # a page of one reads past the cancelled and dead ends to the done ones
    assert [s.id for s in await _walk(backend, "done", 1)] == done[::-1]
    assert [s.id for s in await _walk(backend, "dead", 10)] == [r.body.id]


async def test_each_state_filtered_by_run(backend: Backend, frozen: ManualClock) -> None:
    r1 = await backend.runs.create(name="one")
    r2 = await backend.runs.create(name="two")
    for i in range(6):
        await _push_in(backend, f"p1-{i}", r1)
        await _push_in(backend, f"p2-{i}", r2)
        frozen.advance(0.01)
    await push(backend, "p-none")
    pending_r1 = await _walk(backend, "pending", 2, run=r1)
    assert sorted(s.id for s in pending_r1) == [f"p1-{i}" for i in range(6)]
    assert all(s.run == r1 for s in pending_r1)
    assert len(await _walk(backend, "pending", 50)) == 13
    # finish some of each, kill one of r2, hold one of r1 processing
    done = await _finish(backend, frozen, 8)
    r = await reserve_one(backend)
    await backend.queues.nack(TYPE, r.body.id, r.token, delay_seconds=0, error="x", dead=True)
    held = await reserve_one(backend)
    by_run = {run: {s.id for s in await _walk(backend, "done", 3, run=run)} for run in (r1, r2)}
    assert by_run[r1] | by_run[r2] == {i for i in done if not i.startswith("p-")}
    assert by_run[r1] and all(i.startswith("p1-") for i in by_run[r1])
    assert by_run[r2] and all(i.startswith("p2-") for i in by_run[r2])
    dead = await _walk(backend, "dead", 5, run=r.body.run or "none")
    assert [s.id for s in dead] == ([r.body.id] if r.body.run else [])
    processing = await _walk(backend, "processing", 5, run=held.body.run or "none")
    assert [s.id for s in processing] == ([held.body.id] if held.body.run else [])
    assert await _walk(backend, "done", 5, run="no-such-run") == []
