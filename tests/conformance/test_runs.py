"""Conformance: runs (``Runs`` capability, docs/runs.md) on every backend.

Counters move with push / reserve / ack / nack / dead / cancel / sweep / ttl
expiry in the same step; a run ends exactly once; its callback is queued once
with the summary; ``unique_key`` deduplicates; cancel; paging; expiry.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core import runs as core_runs
from fleet.core.clock import ManualClock
from fleet.core.errors import UnsupportedBackend
from fleet.core.records import PushRequest, TaskBody, new_id, now
from fleet.core.runs import callback_task_id
from tests.conformance.helpers import SHORT, TYPE, elapse

CB = "conf-callback"


@pytest.fixture
async def runs_backend(backend: Backend) -> AsyncIterator[Backend]:
    try:
        await backend.runs.page()
    except UnsupportedBackend:
        pytest.skip("runs are not supported on this backend yet")
    yield backend


def rbody(run: str, task_id: str | None = None, **kw: Any) -> TaskBody:
    return TaskBody(id=task_id or new_id(), payload={"n": 1}, enqueued_at=now(), run=run, **kw)


async def push_run(
    b: Backend, run: str, *ids: str, type_: str = TYPE, unique: str | None = None, **kw: Any
) -> list[Any]:
    delay = kw.pop("delay_seconds", 0.0)
    reqs = [PushRequest(rbody(run, i, **kw), delay, unique_key=unique) for i in ids]
    return await b.queues.push(type_, reqs)


async def counters(b: Backend, run: str) -> dict[str, int]:
    rec = await b.runs.get(run)
    assert rec is not None
    return {k: v for k, v in rec.counters.items() if v}


async def test_create_get_and_defaults(runs_backend: Backend) -> None:
    b = runs_backend
    run = await b.runs.create(name="crawl", on_complete={"type": CB, "payload": {"x": 1}})
    rec = await b.runs.get(run)
    assert rec is not None
    assert rec.state == "running" and rec.name == "crawl" and rec.finished_at is None
    assert rec.on_complete == {"type": CB, "payload": {"x": 1}}
    assert all(v == 0 for v in rec.counters.values())
    assert await b.runs.get("nope") is None


async def test_counters_through_a_lifecycle_and_callback_once(runs_backend: Backend) -> None:
    b = runs_backend
    run = await b.runs.create(on_complete={"type": CB, "payload": {"x": 1}})
    results = await push_run(b, run, "a", "b", "c", max_attempts=1)
    assert all(r.queued for r in results)
    assert await counters(b, run) == {"submitted": 3, "pending": 3}
    got = await b.queues.reserve(TYPE, k=3, visibility_seconds=30)
    assert len(got) == 3
    assert await counters(b, run) == {"submitted": 3, "running": 3}
    by_id = {r.body.id: r for r in got}
    assert by_id["a"].body.run == run
    await b.queues.ack(TYPE, [("a", by_id["a"].token)])
    assert await b.queues.nack(TYPE, "b", by_id["b"].token, delay_seconds=0) == "dead"
    assert await counters(b, run) == {"submitted": 3, "running": 1, "done": 1, "dead": 1}
    assert await b.queues.depths(CB) is not None
    assert await b.queues.reserve(CB, k=5) == []  # not ended yet: no callback
    await b.queues.ack(TYPE, [("c", by_id["c"].token)])
    rec = await b.runs.get(run)
    assert rec is not None and rec.state == "done" and rec.finished_at is not None
    assert rec.counters["done"] == 2 and rec.counters["pending"] == rec.counters["running"] == 0
    assert rec.by_type[TYPE]["done"] == 2
    cb = await b.queues.reserve(CB, k=5)
    assert [r.body.id for r in cb] == [callback_task_id(run)]
    payload = cb[0].body.payload
    assert payload["x"] == 1
    assert payload["run"]["run_id"] == run and payload["run"]["counters"]["done"] == 2
    assert cb[0].body.run is None  # the callback is not part of its run


async def test_retry_does_not_end_the_run(runs_backend: Backend) -> None:
    b = runs_backend
    run = await b.runs.create(on_complete={"type": CB})
    await push_run(b, run, "t", max_attempts=3)
    res = (await b.queues.reserve(TYPE, k=1))[0]
    assert await b.queues.nack(TYPE, "t", res.token, delay_seconds=0) == "retry"
    rec = await b.runs.get(run)
    assert rec is not None and rec.state == "running"
    assert await counters(b, run) == {"submitted": 1, "pending": 1}
    res = (await b.queues.reserve(TYPE, k=1))[0]
    assert res.body.attempt == 2
    await b.queues.ack(TYPE, [("t", res.token)])
    assert await counters(b, run) == {"submitted": 1, "done": 1}
    assert len(await b.queues.reserve(CB, k=5)) == 1


async def test_redelivery_is_not_counted_twice(runs_backend: Backend, frozen: ManualClock) -> None:
    b = runs_backend
    run = await b.runs.create()
    await push_run(b, run, "t")
    first = (await b.queues.reserve(TYPE, k=1, visibility_seconds=SHORT))[0]
    frozen.advance(SHORT + 0.3)
    assert await b.queues.sweep(TYPE) == 1
    assert await counters(b, run) == {"submitted": 1, "pending": 1}
    second = (await b.queues.reserve(TYPE, k=1))[0]
    assert second.token != first.token
    assert await b.queues.ack(TYPE, [("t", first.token)]) == [False]  # the zombie cannot end it
    assert await counters(b, run) == {"submitted": 1, "running": 1}
    await b.queues.ack(TYPE, [("t", second.token)])
    rec = await b.runs.get(run)
    assert rec is not None and rec.state == "done"
    assert await counters(b, run) == {"submitted": 1, "done": 1}


async def test_ttl_expiry_and_cancel_of_queued_tasks_count(
    runs_backend: Backend, frozen: ManualClock
) -> None:
    b = runs_backend
    run = await b.runs.create(on_complete={"type": CB})
    await push_run(b, run, "old", ttl_seconds=0.05)
    await push_run(b, run, "later", delay_seconds=30)
    frozen.advance(0.15)
    assert await b.queues.cancel(TYPE, "later") == "cancelled"
    assert await b.queues.reserve(TYPE, k=5) == []
    rec = await b.runs.get(run)
    assert rec is not None and rec.state == "done"
    assert await counters(b, run) == {"submitted": 2, "expired": 1, "cancelled": 1}
    assert len(await b.queues.reserve(CB, k=5)) == 1


async def test_tasks_spawned_by_tasks_keep_it_running(runs_backend: Backend) -> None:
    b = runs_backend
    run = await b.runs.create(on_complete={"type": CB})
    await push_run(b, run, "seed")
    seed = (await b.queues.reserve(TYPE, k=1))[0]
    await push_run(b, run, "child1", "child2", type_="conf-other")
    await b.queues.ack(TYPE, [("seed", seed.token)])
    rec = await b.runs.get(run)
    assert rec is not None and rec.state == "running"
    for r in await b.queues.reserve("conf-other", k=5):
        await b.queues.ack("conf-other", [(r.body.id, r.token)])
    rec = await b.runs.get(run)
    assert rec is not None and rec.state == "done"
    assert rec.by_type["conf-other"]["done"] == 2 and rec.by_type[TYPE]["done"] == 1
    assert len(await b.queues.reserve(CB, k=5)) == 1
    # Nothing more can join it once it ended.
    late = await push_run(b, run, "late")
    assert not late[0].queued and not late[0].duplicate
    assert len(await b.queues.reserve(CB, k=5)) == 0


async def test_unique_key_deduplicates_within_a_run(runs_backend: Backend) -> None:
    b = runs_backend
    run = await b.runs.create()
    other = await b.runs.create()
    first = await push_run(b, run, "u1", unique="https://x/1")
    dup = await push_run(b, run, "u2", unique="https://x/1")
    elsewhere = await push_run(b, other, "u3", unique="https://x/1")
    assert first[0].queued and not first[0].duplicate
    assert not dup[0].queued and dup[0].duplicate
    assert elsewhere[0].queued
    assert await counters(b, run) == {"submitted": 1, "pending": 1, "duplicates": 1}
    # Still a duplicate after the first one finished: the key lives as long as the run.
    await push_run(b, run, "keep")
    r = (await b.queues.reserve(TYPE, k=1))[0]
    await b.queues.ack(TYPE, [(r.body.id, r.token)])
    again = await push_run(b, run, "u4", unique="https://x/1")
    assert again[0].duplicate
    rec = await b.runs.get(run)
    assert rec is not None and rec.counters["duplicates"] == 2


async def test_cancel_a_run(runs_backend: Backend) -> None:
    b = runs_backend
    run = await b.runs.create(on_complete={"type": CB})
    await push_run(b, run, "q1", "q2", "running")
    await push_run(b, run, "sched", delay_seconds=30)
    held = (await b.queues.reserve(TYPE, k=1))[0]
    done = await b.runs.cancel(run)
    assert done is not None
    rec = done.record
    assert rec.state == "cancelled" and rec.finished_at is not None
    assert done.stopping == ((TYPE, held.body.id),)
    assert await b.queues.reserve(TYPE, k=5) == []
    from fleet.core.records import LeaseStatus

    assert await b.queues.extend(TYPE, held.body.id, held.token, 30) == LeaseStatus.CANCELLED
    await b.queues.ack(TYPE, [(held.body.id, held.token)])
    rec = await b.runs.get(run)
    assert rec is not None and rec.state == "cancelled"
    assert rec.counters["cancelled"] == 4 and rec.counters["pending"] == 0
    assert rec.counters["running"] == 0
    assert await b.queues.reserve(CB, k=5) == []  # no on_complete for a cancelled run
    refused = await push_run(b, run, "more")
    assert not refused[0].queued
    assert await b.runs.cancel("nope") is None


async def test_list_pages_newest_first(runs_backend: Backend) -> None:
    b = runs_backend
    made = [await b.runs.create(name=f"r{i}") for i in range(5)]
    page = await b.runs.page(limit=2)
    seen = [r.id for r in page.runs]
    while page.next is not None:
        page = await b.runs.page(after=page.next, limit=2)
        seen += [r.id for r in page.runs]
    assert [i for i in seen if i in made] == made[::-1]


async def test_ended_runs_expire(
    runs_backend: Backend, monkeypatch: pytest.MonkeyPatch, frozen: ManualClock
) -> None:
    monkeypatch.setenv("FLEET_RUN_TTL_SECONDS", "0.3")
    # A backend opened now has the setting (Redis scripts take it at load).
    b = await open_backend(runs_backend.url)
    try:
        await _expiry(b, frozen)
    finally:
        await b.close()


async def _expiry(b: Backend, frozen: ManualClock) -> None:
    run = await b.runs.create()
    await push_run(b, run, "t")
    r = (await b.queues.reserve(TYPE, k=1))[0]
    await b.queues.ack(TYPE, [("t", r.token)])
    assert await b.runs.get(run) is not None
    await elapse(b, frozen, 0.5)  # on Redis the ended run's hash expires (EXPIRE)
    await b.runs.create()  # any write prunes
    assert await b.runs.get(run) is None


def test_rule_ends_exactly_once() -> None:
    c = core_runs.zero_counters()
    c, end = core_runs.step("running", c, "queued")
    assert not end
    c, end = core_runs.step("running", c, "started")
    c, end = core_runs.step("running", c, "requeued")
    assert not end and c["pending"] == 1
    c, end = core_runs.step("running", c, "started")
    c, end = core_runs.step("running", c, "done")
    assert end and c["done"] == 1 and c["submitted"] == 1
    _, again = core_runs.step("done", c, "duplicate")
    assert not again
    assert core_runs.deltas("dead", from_running=True) == (("running", -1), ("dead", 1))
    assert core_runs.deltas("cancelled") == (("pending", -1), ("cancelled", 1))
