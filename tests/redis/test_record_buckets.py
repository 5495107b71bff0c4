"""The records of live tasks in buckets (``keys.record_bucket``, ``queue_common.lua``):
the Python and Lua rules agree, short records stay in listpack-encoded buckets, long
ones in ``:tasks``, records written before buckets are still served, and a purge
takes the buckets with it."""

from __future__ import annotations

import json
import uuid

import redis.asyncio as aioredis

from fleet.backends.redis import RedisBackend
from fleet.backends.redis.keys import RECORD_BUCKETS, record_bucket, record_key
from fleet.backends.redis.scripts import load_source
from fleet.core.records import PushRequest, TaskBody

TASKS = "fleet:queue:t:tasks"


def req(task_id: str, delay: float = 0.0) -> PushRequest:
    return PushRequest(TaskBody(id=task_id, payload={"x": 1}), delay)


def test_hex_ids_spread_evenly_over_every_bucket() -> None:
    suffixes = [f"{n:03x}" for n in range(16**3)]
    counts = [0] * RECORD_BUCKETS
    for s in suffixes:
        counts[record_bucket("abc" + s)] += 1
    assert set(counts) == {16**3 // RECORD_BUCKETS}  # each bucket takes 4 of 4096
    assert record_bucket("") == record_bucket("0") == record_bucket("000") == 0
    assert record_key(TASKS, "x-00f") == f"{TASKS}:{record_bucket('x-00f')}"


async def test_lua_and_python_put_an_id_in_the_same_bucket(raw: aioredis.Redis) -> None:
    ids = [uuid.uuid4().hex for _ in range(200)]
    ids += ["", "a", "ab", "é", "日本語", "x\u00e9", "order-000123", "ID-FFF", 'a|b"c']
    script = load_source("queue_common") + (
        "\nlocal out = {}\nfor i, id in ipairs(ARGV) do out[i] = record_bucket(id) end\nreturn out"
    )
    keys = [f"k{i}" for i in range(1, 24)]
    keys[9] = "fleet:queue:t:done:1"
    got = await raw.eval(script, len(keys), *keys, *ids)
    assert got == [record_bucket(i) for i in ids]
    assert all(0 <= b < RECORD_BUCKETS for b in got)


async def test_short_records_in_buckets_long_ones_in_tasks(
    rb: RedisBackend, raw: aioredis.Redis
) -> None:
    ids = [uuid.uuid4().hex for _ in range(300)]
    await rb.queues.push("t", [req(i) for i in ids])
    assert await raw.hlen(TASKS) == 0
    for i in ids[:20]:
        assert (await raw.hget(record_key(TASKS, i), i)).startswith("q|")
    buckets = {record_key(TASKS, i) for i in ids}
    assert {await raw.object("encoding", b) for b in buckets} == {"listpack"}
    # A failure keeps the error (and the body, while it waits) in the record: too
    # long for a bucket, so it stays in :tasks, until the task ends.
    # A running task's record is in :tasks, where mark and ack read them all at once.
    got = await rb.queues.reserve("t", k=1)
    tid = got[0].body.id
    assert (await raw.hget(TASKS, tid)).startswith("p|1|")
    assert await raw.hget(record_key(TASKS, tid), tid) is None
    await rb.queues.nack("t", tid, got[0].token, delay_seconds=0.0, error="boom " * 20)
    assert await raw.hget(record_key(TASKS, tid), tid) is None
    assert (await raw.hget(TASKS, tid)).startswith("s|1|")
    assert (await rb.queues.state("t", tid)).last_error == "boom " * 20
    assert {await raw.object("encoding", b) for b in buckets} <= {"listpack", None}
    taken = []
    while got := await rb.queues.reserve("t", k=100):
        taken += [(r.body.id, r.token) for r in got]
    assert sorted(i for i, _ in taken) == sorted(ids)  # tid among them, run again
    assert (await raw.hget(TASKS, tid)).startswith("p|2|")  # the error stays with it
    assert all(await rb.queues.ack("t", taken))
    assert await raw.exists(*buckets) == 0 and await raw.exists(TASKS) == 0


async def test_records_written_before_buckets_are_served(
    rb: RedisBackend, raw: aioredis.Redis
) -> None:
    # A queue left by a Fleet that kept every record in :tasks: the task is known,
    # browsed and leased; released, its record moves to its bucket; the ack ends it.
    await raw.rpush("fleet:queue:t", json.dumps({"id": "old1", "payload": {"a": 1}}))
    await raw.hset(TASKS, "old1", "q|0||0||||/1796500000.5")
    assert (await rb.queues.state("t", "old1")).state == "queued"
    page = await rb.browse.page("t", "pending", 10, None)
    assert [s.id for s in page.items] == ["old1"]
    body = await rb.browse.body("t", "old1")
    assert body is not None and body.enqueued_at == 1796500000.5
    assert (await rb.queues.depths("t")).oldest_pending_age is not None
    got = await rb.queues.reserve("t", k=1)
    assert [(r.body.id, r.body.attempt) for r in got] == [("old1", 1)]
    assert (await raw.hget(TASKS, "old1")).startswith("p|1|")
    assert await rb.queues.release("t", "old1", got[0].token)
    assert await raw.hget(TASKS, "old1") is None  # waiting again: in its bucket
    assert (await raw.hget(record_key(TASKS, "old1"), "old1")).startswith("q|0|")
    got = await rb.queues.reserve("t", k=1)
    assert await rb.queues.ack("t", [("old1", got[0].token)]) == [True]
    assert (await rb.queues.state("t", "old1")).state == "done"
    assert await raw.exists(TASKS, record_key(TASKS, "old1")) == 0
    # A pushed id whose record is still in :tasks is a live duplicate.
    await raw.hset(TASKS, "old2", "q|0||0||||/1796500000.5")
    (res,) = await rb.queues.push("t", [req("old2")])
    assert res.duplicate and not res.queued


async def test_browse_and_purge_see_every_bucket(rb: RedisBackend, raw: aioredis.Redis) -> None:
    ids = [uuid.uuid4().hex for _ in range(50)]
    await rb.queues.push("t", [req(i) for i in ids])
    await rb.queues.push("t", [req("later", delay=3600)])  # long: in :tasks
    page = await rb.browse.page("t", "pending", 100, None)
    assert sorted(s.id for s in page.items) == sorted(ids)
    assert [s.id for s in (await rb.browse.page("t", "scheduled", 10, None)).items] == ["later"]
    await rb.purge_type("t")
    assert [k async for k in raw.scan_iter(match="fleet:queue:t*")] == []
