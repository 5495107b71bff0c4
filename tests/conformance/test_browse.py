"""Conformance: ``backend.browse`` — pages of a type's tasks by state, newest first by
``(enqueued_at, id)``, walked by cursor; and DLQ selections replayed or deleted by id."""

from __future__ import annotations

import pytest

from fleet.backends.base import Backend
from fleet.core.capabilities.browse import BadCursor, Position, TaskSummary, encode_cursor
from fleet.core.records import PushRequest, TaskBody, now

from .helpers import TYPE, push, reserve_one


async def _walk(backend: Backend, state: str, limit: int) -> list[TaskSummary]:
    out: list[TaskSummary] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = await backend.browse.page(TYPE, state, limit, cursor)  # type: ignore[arg-type]
        assert len(page.items) <= limit
        out += page.items
        pages += 1
        if page.next_cursor is None:
            return out
        assert len(page.items) == limit
        cursor = page.next_cursor
        assert pages < 10_000


def _b(tid: str, at: float, **kw: object) -> PushRequest:
    return PushRequest(TaskBody(id=tid, payload={"n": 1}, enqueued_at=at, **kw), 0.0, None, 0.0)  # type: ignore[arg-type]


async def _kill(backend: Backend, error: str = "boom") -> str:
    r = await reserve_one(backend)
    await backend.queues.nack(TYPE, r.body.id, r.token, delay_seconds=0, error=error, dead=True)
    return r.body.id


async def test_ten_thousand_pending_paged_newest_first(backend: Backend) -> None:
    base = now() - 10_000
    # Ties of seven on enqueued_at (a batch submit shares one time): the id breaks them.
    reqs = [
        _b(
            f"t{i:05d}",
            base + i // 7,
            priority=(i % 3) - 1,
            group=f"g{i % 4}" if i % 5 == 0 else None,
        )
        for i in range(10_000)
    ]
    for start in range(0, len(reqs), 1_000):
        assert all(r.queued for r in await backend.queues.push(TYPE, reqs[start : start + 1_000]))
    walked = await _walk(backend, "pending", 50)
    ids = [s.id for s in walked]
    expected = [
        r.body.id for r in sorted(reqs, key=lambda r: (r.body.enqueued_at, r.body.id), reverse=True)
    ]
    assert len(ids) == len(set(ids)) == 10_000
    assert ids == expected
    by_id = {s.id: s for s in walked}
    assert by_id["t00005"].group == "g1" and by_id["t00005"].tier == "high"
    assert by_id["t00001"].group is None and by_id["t00001"].tier == "normal"
    assert by_id["t00000"].tier == "low" and by_id["t00000"].state == "pending"
    assert by_id["t00000"].enqueued_at == base


async def test_each_state_listed_with_its_fields(backend: Backend) -> None:
    run_id = await backend.runs.create(name="browse")
    t = now()
    # pend1 keeps the run open (a run whose last task died has ended and refuses
    # pushes); priorities make the reserves below take dead1, then proc1.
    await backend.queues.push(TYPE, [_b("dead1", t - 5, run=run_id, group="shop", priority=5)])
    await backend.queues.push(TYPE, [_b("pend1", t - 2, run=run_id, priority=-1)])
    assert await _kill(backend, "it broke") == "dead1"
    await backend.queues.push(TYPE, [_b("proc1", t - 4, priority=3)])
    r = await reserve_one(backend, visibility_seconds=60)
    assert r.body.id == "proc1"
    await backend.queues.push(
        TYPE, [PushRequest(TaskBody(id="sched1", payload=1, enqueued_at=t - 3), 120.0, None, 0.0)]
    )
    await backend.queues.push(TYPE, [_b("pend2", t - 1)])

    pending = (await backend.browse.page(TYPE, "pending", 10, None)).items
    assert [s.id for s in pending] == ["pend2", "pend1"]
    assert pending[1].run == run_id and pending[0].run is None
    assert pending[0].attempt == 0

    (sched,) = (await backend.browse.page(TYPE, "scheduled", 10, None)).items
    assert (sched.id, sched.state) == ("sched1", "scheduled")
    assert sched.ready_at is not None and sched.ready_at == pytest.approx(now() + 120, abs=10)

    (proc,) = (await backend.browse.page(TYPE, "processing", 10, None)).items
    assert (proc.id, proc.attempt, proc.priority, proc.tier) == ("proc1", 1, 3, "high")
    assert proc.deadline is not None and proc.deadline == pytest.approx(now() + 60, abs=10)

    page = await backend.browse.page(TYPE, "dead", 10, None)
    assert page.next_cursor is None
    (dead,) = page.items
    assert (dead.id, dead.state, dead.group, dead.run) == ("dead1", "dead", "shop", run_id)
    assert dead.last_error == "it broke" and dead.attempt == 1
    assert dead.enqueued_at == t - 5


async def test_each_state_walks_without_repeats(backend: Backend) -> None:
    t = now() - 1_000
    await backend.queues.push(TYPE, [_b(f"d{i:03d}", t + i) for i in range(30)])
    for _ in range(30):
        await _kill(backend)
    await backend.queues.push(TYPE, [_b(f"p{i:03d}", t + i) for i in range(25)])
    await backend.queues.reserve(TYPE, k=25, visibility_seconds=60)
    await backend.queues.push(
        TYPE,
        [
            PushRequest(TaskBody(id=f"s{i:03d}", payload=1, enqueued_at=t + i), 300.0, None, 0.0)
            for i in range(20)
        ],
    )
    for state, prefix, n in (("dead", "d", 30), ("processing", "p", 25), ("scheduled", "s", 20)):
        ids = [s.id for s in await _walk(backend, state, 7)]
        assert ids == [f"{prefix}{i:03d}" for i in reversed(range(n))], state
    assert await _walk(backend, "pending", 7) == []


async def test_a_walk_never_repeats_while_tasks_move(backend: Backend) -> None:
    t = now() - 1_000
    await backend.queues.push(TYPE, [_b(f"m{i:03d}", t + i) for i in range(100)])
    first = await backend.browse.page(TYPE, "pending", 30, None)
    assert [s.id for s in first.items] == [f"m{i:03d}" for i in range(99, 69, -1)]
    # The oldest ten start (leave pending) and a newer task arrives: the walk goes on
    # from where it was, lists neither the new one nor a task twice.
    await backend.queues.reserve(TYPE, k=10, visibility_seconds=60)
    await backend.queues.push(TYPE, [_b("newer", t + 500)])
    cursor = first.next_cursor
    rest: list[str] = []
    while cursor is not None:
        page = await backend.browse.page(TYPE, "pending", 30, cursor)
        rest += [s.id for s in page.items]
        cursor = page.next_cursor
    assert rest == [f"m{i:03d}" for i in range(69, 9, -1)]


async def test_cursor_and_arguments_checked(backend: Backend) -> None:
    for bad in ("", "nope", "!!!!", encode_cursor(Position(1.0, "x"))[:-3] + "@@@", "WzEsMl0"):
        with pytest.raises(BadCursor):
            await backend.browse.page(TYPE, "pending", 10, bad)
    with pytest.raises(ValueError):
        await backend.browse.page(TYPE, "pending", 0, None)
    with pytest.raises(ValueError):
        await backend.browse.page(TYPE, "pending", 501, None)
    with pytest.raises(ValueError):
        await backend.browse.page(TYPE, "finished", 10, None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        await backend.browse.page(TYPE, "done", 10, None, run="")
    # A cursor made for another walk is still a position: it answers, never fails.
    page = await backend.browse.page(TYPE, "dead", 10, encode_cursor(Position(1.0, "x")))
    assert page.items == () and page.next_cursor is None


async def test_dead_select_replay_reports_unknown(backend: Backend) -> None:
    await push(backend, "a", "b", "c")
    for _ in range(3):
        await _kill(backend)
    picked = await backend.browse.dead_select(TYPE, ["c", "zz", "a", "c"], replay=True)
    assert (picked.done, picked.skipped, picked.unknown) == (("c", "a"), (), ("zz",))
    assert [b.id for b in await backend.queues.dead_peek(TYPE)] == ["b"]
    info = await backend.queues.state(TYPE, "a")
    assert (info.state, info.attempt) == ("queued", 0)
    assert sorted(s.id for s in (await backend.browse.page(TYPE, "pending", 10, None)).items) == [
        "a",
        "c",
    ]


async def test_dead_select_replay_skips_an_id_pushed_again(backend: Backend) -> None:
    await push(backend, "x")
    await _kill(backend)
    await push(backend, "x")  # a live copy of the id wins over the dead one
    picked = await backend.browse.dead_select(TYPE, ["x"], replay=True)
    assert (picked.done, picked.skipped, picked.unknown) == ((), ("x",), ())
    assert await backend.queues.dead_peek(TYPE) == []
    assert (await backend.queues.depths(TYPE)).normal == 1


async def test_dead_select_delete(backend: Backend) -> None:
    await push(backend, "a", "b", "c")
    for _ in range(3):
        await _kill(backend)
    picked = await backend.browse.dead_select(TYPE, ["b", "nope", "b"], replay=False)
    assert (picked.done, picked.skipped, picked.unknown) == (("b",), (), ("nope",))
    assert [b.id for b in await backend.queues.dead_peek(TYPE)] == ["a", "c"]
    depths = await backend.queues.depths(TYPE)
    assert (depths.dead, depths.normal) == (2, 0)
    assert [s.id for s in (await backend.browse.page(TYPE, "dead", 10, None)).items] == ["c", "a"]
    assert (await backend.queues.state(TYPE, "b")).state != "dead"
    empty = await backend.browse.dead_select(TYPE, [], replay=False)
    assert empty.done == empty.unknown == ()


async def test_task_state_shows_the_traceback(backend: Backend) -> None:
    # The search-by-id view (GET .../tasks/{id}) shows the last failure's traceback.
    await push(backend, "r", "k")
    for tid, dead in (("r", False), ("k", True)):
        r = await reserve_one(backend)
        assert r.body.id == tid
        await backend.queues.nack(
            TYPE, tid, r.token, delay_seconds=60, error="E", traceback=f"Trace {tid}", dead=dead
        )
    retried = await backend.queues.state(TYPE, "r")
    assert (retried.state, retried.traceback) == ("scheduled", "Trace r")
    dead = await backend.queues.state(TYPE, "k")
    assert (dead.state, dead.traceback, dead.to_dict()["traceback"]) == (
        "dead",
        "Trace k",
        "Trace k",
    )


async def test_the_stored_body_of_a_task_in_each_state(backend: Backend) -> None:
    """``browse.body``: the payload the task page shows, wherever the task's state keeps
    it (pending in a tier or a group list, scheduled, processing, dead); a finished
    task keeps none."""
    t = now()
    await backend.queues.push(
        TYPE,
        [
            _req("later", t, delay=600.0),
            _req("plain", t - 3, priority=-1),
            _req("grouped", t - 2, group="shop"),
            *[_req(f"filler{i}", t - 10 - i) for i in range(30)],
        ],
    )
    got = await backend.browse.body(TYPE, "plain")
    assert got is not None and got.payload == {"id": "plain"} and got.priority == -1
    got = await backend.browse.body(TYPE, "grouped")
    assert got is not None and got.payload == {"id": "grouped"} and got.group == "shop"
    later = await backend.browse.body(TYPE, "later")
    assert later is not None and later.payload == {"id": "later"}
    held = await reserve_one(backend)
    got = await backend.browse.body(TYPE, held.body.id)
    assert got is not None and got.id == held.body.id
    await backend.queues.ack(TYPE, [(held.body.id, held.token)])
    assert await backend.browse.body(TYPE, held.body.id) is None  # finished: not kept
    dead = await _kill(backend)
    got = await backend.browse.body(TYPE, dead)
    assert got is not None and got.id == dead
    assert await backend.browse.body(TYPE, "never-seen") is None


def _req(tid: str, at: float, delay: float = 0.0, **kw: object) -> PushRequest:
    body = TaskBody(id=tid, payload={"id": tid}, enqueued_at=at, **kw)  # type: ignore[arg-type]
    return PushRequest(body, delay, None, 0.0)
