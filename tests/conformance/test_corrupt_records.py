"""One corrupt stored record affects only itself (docs/operations.md, "Corrupt
records"): catalog entries, worker records and dead letters planted straight into
the storage come back marked instead of failing the read, the records beside them
intact, and the next write of a record replaces one that cannot be read. A queue
head that cannot be read goes to the DLQ instead of stalling the queue."""

from __future__ import annotations

import asyncio

import pytest
import redis

from fleet.backends.base import Backend
from fleet.core.records import PushRequest, TaskBody
from fleet.core.stored import SHOWN_CHARS, UnreadableBody, entry_unreadable
from tests.conformance.helpers import TYPE, drain, push
from tests.support.corrupt import NOT_UTF8, WORKER_PARTS, Planter

HW = {"host": "h1", "cpu_count": 2}
GOOD_ENTRY = {"type": "good", "kind": "BatchAutomation", "queue": {"type": "object"}}

#: Stored values no decoder can make a record of, by kind of damage.
GARBAGE = {
    "not json": "{not json",
    "not utf-8": NOT_UTF8,
    "not an object": "[1, 2]",
}


def _planter(backend: Backend) -> Planter:
    return Planter(backend.url)


async def _worker(backend: Backend, worker_id: str = "w1", t: str = TYPE) -> None:
    await backend.workers.register(t, worker_id, HW)
    await backend.workers.set_state(t, worker_id, {"state": "RUNNING", "last_seen": "100.5"})
    await backend.workers.put_stats(t, worker_id, {"slots": {"busy": 1, "total": 2}})
    assert await backend.configs.put_desired(t, worker_id, {"slots": 2}, 5)


# ------------------------------------------------------------------ catalog
@pytest.mark.parametrize("damage", sorted(GARBAGE))
async def test_an_unreadable_catalog_entry_is_marked_and_the_others_read(
    backend: Backend, damage: str
) -> None:
    await backend.catalog.put("good", GOOD_ENTRY)
    await backend.catalog.put("bad", GOOD_ENTRY | {"type": "bad"})
    _planter(backend).catalog("bad", GARBAGE[damage])

    entries = await backend.catalog.all()
    assert entries["good"] == GOOD_ENTRY
    bad = entries["bad"]
    assert bad["type"] == "bad" and "queue" not in bad
    why = entry_unreadable(bad)
    assert why is not None and why.startswith("the stored catalog entry is ")
    assert isinstance(bad["raw"], str) and bad["raw"]
    assert await backend.catalog.get("bad") == bad
    assert await backend.catalog.get("good") == GOOD_ENTRY
    assert entry_unreadable(GOOD_ENTRY) is None

    await backend.catalog.put("bad", GOOD_ENTRY | {"type": "bad"})  # a worker publishes it
    assert await backend.catalog.get("bad") == GOOD_ENTRY | {"type": "bad"}


async def test_the_raw_text_of_an_unreadable_entry_is_cut(backend: Backend) -> None:
    await backend.catalog.put("bad", GOOD_ENTRY)
    _planter(backend).catalog("bad", "x" * 5000)
    raw = (await backend.catalog.all())["bad"]["raw"]
    assert raw == "x" * SHOWN_CHARS + "…"


# ------------------------------------------------------------------ workers
@pytest.mark.parametrize("part", WORKER_PARTS)
async def test_an_unreadable_worker_part_is_named_and_the_rest_read(
    backend: Backend, part: str
) -> None:
    await _worker(backend, "w1")
    await _worker(backend, "w2")
    _planter(backend).worker(TYPE, "w1", part, "garbage")

    rec = await backend.workers.get(TYPE, "w1")
    assert rec is not None and rec.unreadable == (part,)
    assert rec.hardware == ({} if part == "hardware" else HW)
    assert rec.config == (None if part == "config" else {"slots": 2})
    assert rec.gen == (0 if part == "gen" else 5)
    expected_state = {"state": "RUNNING", "last_seen": "100.5"}
    assert rec.state == ({} if part == "state" else expected_state)
    assert rec.stats == (None if part == "stats" else {"slots": {"busy": 1, "total": 2}})
    other = await backend.workers.get(TYPE, "w2")
    assert other is not None and other.unreadable == () and other.stats is not None
    assert await backend.workers.all() == [(TYPE, "w1"), (TYPE, "w2")]
    # A desired config or generation that cannot be read is answered as none, so
    # that the worker writes its own back.
    desired = await backend.configs.desired(TYPE, "w1")
    assert desired == ((None, 0) if part in ("config", "gen") else ({"slots": 2}, 5))


async def test_parts_that_are_not_utf8_or_not_objects_are_unreadable(backend: Backend) -> None:
    await _worker(backend, "w1")
    planter = _planter(backend)
    planter.worker(TYPE, "w1", "stats", NOT_UTF8)
    planter.worker(TYPE, "w1", "hardware", '"a string"')
    planter.worker(TYPE, "w1", "config", "[1]")
    planter.worker(TYPE, "w1", "gen", "-3")
    rec = await backend.workers.get(TYPE, "w1")
    assert rec is not None
    assert rec.unreadable == ("hardware", "config", "gen", "stats")
    assert rec.state == {"state": "RUNNING", "last_seen": "100.5"}


async def test_the_next_write_of_each_part_replaces_an_unreadable_one(backend: Backend) -> None:
    await _worker(backend, "w1")
    planter = _planter(backend)
    for part in WORKER_PARTS:
        planter.worker(TYPE, "w1", part, "garbage")
    rec = await backend.workers.get(TYPE, "w1")
    assert rec is not None and rec.unreadable == WORKER_PARTS

    # what a heartbeat writes
    await backend.workers.register(TYPE, "w1", HW)
    await backend.workers.set_state(TYPE, "w1", {"state": "IDLE", "last_seen": "200"})
    await backend.workers.put_stats(TYPE, "w1", {"ts": 2})
    # a desired config with any generation replaces one that cannot be read, even a
    # generation lower than the one stored before
    assert await backend.configs.put_desired(TYPE, "w1", {"slots": 3}, 2)
    rec = await backend.workers.get(TYPE, "w1")
    assert rec is not None and rec.unreadable == ()
    assert (rec.hardware, rec.config, rec.gen) == (HW, {"slots": 3}, 2)
    assert rec.state == {"state": "IDLE", "last_seen": "200"}
    assert rec.stats == {"ts": 2}
    # and once readable, generations are compared again
    assert not await backend.configs.put_desired(TYPE, "w1", {"slots": 4}, 2)
    assert await backend.configs.desired(TYPE, "w1") == ({"slots": 3}, 2)


async def test_an_unreadable_config_alone_is_replaced_by_the_same_generation(
    backend: Backend,
) -> None:
    await _worker(backend, "w1")
    _planter(backend).worker(TYPE, "w1", "config", NOT_UTF8)
    # the generation (5) is intact: a write-back of the held generation must land
    assert await backend.configs.put_desired(TYPE, "w1", {"slots": 2}, 5)
    assert await backend.configs.desired(TYPE, "w1") == ({"slots": 2}, 5)


# ------------------------------------------------------------------ dead letters
def _raw_only(backend: Backend) -> Planter:
    planter = _planter(backend)
    assert planter.holds_raw_tasks
    return planter


async def test_an_unreadable_dead_letter_is_shown_with_its_id_and_raw_text(
    backend: Backend,
) -> None:
    planter = _raw_only(backend)
    await push(backend, "ok-1", max_attempts=1)
    (res,) = await backend.queues.reserve(TYPE)
    assert (
        await backend.queues.nack(TYPE, "ok-1", res.token, delay_seconds=0, error="boom") == "dead"
    )
    planter.dead(TYPE, "bad-1", '{"id":"bad-1","payload":' + "x" * 500)
    planter.dead(TYPE, "bad-2", NOT_UTF8)
    await push(backend, "ok-2", max_attempts=1)
    (res,) = await backend.queues.reserve(TYPE)
    assert (
        await backend.queues.nack(TYPE, "ok-2", res.token, delay_seconds=0, error="bang") == "dead"
    )

    dead = await backend.queues.dead_peek(TYPE, 10)
    assert [b.id for b in dead][:2] == ["ok-1", "bad-1"]
    ok1, bad1, bad2, ok2 = dead
    assert not isinstance(ok1, UnreadableBody) and ok1.last_error == "boom"
    assert not isinstance(ok2, UnreadableBody) and ok2.last_error == "bang"
    for marker in (bad1, bad2):
        assert isinstance(marker, UnreadableBody)
        d = marker.to_dict()
        assert d["unreadable"] and d["last_error"].startswith("the stored body could not be read")
        assert len(d["raw"]) <= SHOWN_CHARS + 1
    assert bad1.raw.startswith('{"id":"bad-1","payload":xxx') and bad1.raw.endswith("…")
    # SQLite keeps the id in its own column; a Redis entry without a readable id has none
    assert bad2.id == ("bad-2" if planter.kind == "sqlite" else "")
    assert (await backend.queues.depths(TYPE)).dead == 4
    state = await backend.queues.state(TYPE, "bad-1")
    assert state.state in ("dead", "unknown")  # Redis indexes dead letters by record
    # replaying everything moves the readable ones; the rest stays, still shown
    assert await backend.queues.dead_replay(TYPE) >= 2
    assert sorted(await drain(backend)) == ["ok-1", "ok-2"]


async def test_a_corrupt_dead_record_leaves_its_body_readable(backend: Backend) -> None:
    planter = _raw_only(backend)
    if planter.kind != "redis":
        pytest.skip("only Redis keeps a dead letter's state record beside its body")
    await push(backend, "ok-1", max_attempts=1)
    (res,) = await backend.queues.reserve(TYPE)
    await backend.queues.nack(TYPE, "ok-1", res.token, delay_seconds=0, error="boom")
    client = redis.Redis.from_url(backend.url)
    client.hset(f"fleet:queue:{TYPE}:dead:info", "ok-1", "garbage")
    client.close()
    (body,) = await backend.queues.dead_peek(TYPE)
    assert body.id == "ok-1" and not isinstance(body, UnreadableBody)


# ------------------------------------------------------------------ queue heads
async def test_a_queue_head_that_cannot_be_read_is_dead_lettered(backend: Backend) -> None:
    planter = _raw_only(backend)
    await push(backend, "head", "next-1", "next-2")
    if planter.kind == "sqlite":
        planter.task_body(TYPE, "head", "{not json")
        bad_id = "head"
    else:
        # JSON with an id but not a task body (the script delivers it, Python cannot
        # read it), and one that is not JSON at all (the script dead-letters it)
        planter.push_head(TYPE, '{"id":"odd","payload":1,"priority":"high"}')
        planter.push_head(TYPE, "{not json")
        bad_id = "odd"
        assert await backend.queues.dead_peek(TYPE) == []

    # the queue keeps draining: one reserve takes what can be read
    got = await backend.queues.reserve(TYPE, k=5)
    ids = [r.body.id for r in got]
    assert ids == (
        ["next-1", "next-2"] if planter.kind == "sqlite" else ["head", "next-1", "next-2"]
    )
    assert await backend.queues.ack(TYPE, [(r.body.id, r.token) for r in got]) == [True] * len(got)
    assert await drain(backend) == []

    dead = await backend.queues.dead_peek(TYPE)
    found = {b.id: b for b in dead}
    assert bad_id in found
    entry = found[bad_id].to_dict()
    assert "could not be read" in (entry["last_error"] or "")
    assert (await backend.queues.depths(TYPE)).dead == len(dead)
    state = await backend.queues.state(TYPE, bad_id)
    assert state.state in ("dead", "unknown")


async def test_a_task_state_that_cannot_be_read_is_answered(backend: Backend) -> None:
    planter = _raw_only(backend)
    if planter.kind != "sqlite":
        pytest.skip("SQLite keeps the body with the task's state")
    await push(backend, "t1")
    planter.task_body(TYPE, "t1", "{not json")
    info = await backend.queues.state(TYPE, "t1")
    assert info.state == "queued" and "could not be read" in (info.last_error or "")
    assert await backend.queues.cancel(TYPE, "t1") == "cancelled"


async def test_an_event_message_that_is_not_json_is_delivered_as_text(backend: Backend) -> None:
    planter = _raw_only(backend)
    sub = await backend.events.subscribe("corrupt.topic")
    try:
        planter.event("corrupt.topic", "{x")
        await backend.events.publish("corrupt.topic", {"ok": 1})
        first = await asyncio.wait_for(sub.__anext__(), 5)
        second = await asyncio.wait_for(sub.__anext__(), 5)
        assert first == ("corrupt.topic", "{x")
        assert second == ("corrupt.topic", {"ok": 1})
    finally:
        await sub.aclose()


async def test_bodies_pushed_later_are_unaffected(backend: Backend) -> None:
    """A control: the marker never leaks into what push and reserve hand out."""
    await backend.queues.push(TYPE, [PushRequest(TaskBody(id="plain", payload={"n": 1}))])
    (res,) = await backend.queues.reserve(TYPE)
    assert type(res.body) is TaskBody and res.body.payload == {"n": 1}
