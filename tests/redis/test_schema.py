"""What the Redis backend writes is the documented schema (docs/redis-schema.md),
checked with a plain redis client as an operator with redis-cli would see it."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
import redis.asyncio as aioredis

from fleet.backends.redis import RedisBackend
from fleet.backends.redis.keys import record_bucket
from fleet.core.history import MINUTE_KEEP_SECONDS, Reported, bucket_start
from fleet.core.records import PushRequest, TaskBody, now


def req(task_id: str, priority: int = 0, delay: float = 0.0) -> PushRequest:
    return PushRequest(TaskBody(id=task_id, payload={"x": task_id}, priority=priority), delay)


async def test_queue_keys(rb: RedisBackend, raw: aioredis.Redis) -> None:
    await rb.queues.push("t", [req("n1"), req("h1", 5), req("l1", -5), req("s1", delay=60)])
    assert [json.loads(b)["id"] for b in await raw.lrange("fleet:queue:t", 0, -1)] == ["n1"]
    body = json.loads((await raw.lrange("fleet:queue:t", 0, -1))[0])
    # The submit time lives in the record only (docs/redis-schema.md, "Bodies").
    assert body["payload"] == {"x": "n1"} and "enqueued_at" not in body
    # A short record lives in its bucket, a long one (the scheduled body in it) in :tasks.
    n1 = await raw.hget(f"fleet:queue:t:tasks:{record_bucket('n1')}", "n1")
    submitted = float(n1.split("|")[7].split("/")[1])
    assert submitted > 0 and await raw.hget("fleet:queue:t:tasks", "n1") is None
    assert (await raw.hget("fleet:queue:t:tasks", "s1")).startswith("s|")
    assert await raw.hget(f"fleet:queue:t:tasks:{record_bucket('s1')}", "s1") is None
    assert await raw.llen("fleet:queue:t:high") == 1
    assert await raw.llen("fleet:queue:t:low") == 1
    sched = await raw.zrange("fleet:queue:t:scheduled", 0, -1, withscores=True)
    assert json.loads(sched[0][0])["id"] == "s1"
    res = (await rb.queues.reserve("t", k=1, visibility_seconds=30))[0]
    assert res.body.id == "h1"
    deadline = await raw.zscore("fleet:queue:t:processing", "h1")
    assert deadline == pytest.approx(res.deadline, abs=1e-3)
    assert json.loads(await raw.hget("fleet:queue:t:processing:body", "h1"))["id"] == "h1"
    assert (
        await rb.queues.nack("t", "h1", res.token, delay_seconds=0, error="boom", dead=True)
        == "dead"
    )
    assert json.loads((await raw.lrange("fleet:queue:t:dead", 0, -1))[0])["id"] == "h1"
    assert await raw.zcard("fleet:queue:t:processing") == 0
    counters = await raw.hgetall("fleet:queue:t:counters")
    assert counters["submitted"] == "4" and counters["dead"] == "1"


async def test_push_by_hand_with_rpush_is_delivered(rb: RedisBackend, raw: aioredis.Redis) -> None:
    # The spec: ctx.submit does RPUSH of {"id", "payload"}; a hand-made body works.
    await raw.rpush("fleet:queue:t", json.dumps({"id": "hand", "payload": {"a": 1}}))
    await raw.rpush("fleet:queue:t", "not json")
    got = await rb.queues.reserve("t", k=2)
    assert [r.body.id for r in got] == ["hand"]
    assert got[0].body.attempt == 1 and got[0].body.payload == {"a": 1}
    assert await rb.queues.ack("t", [(got[0].body.id, got[0].token)]) == [True]
    # The unusable body was dead-lettered, not lost and not looping.
    assert await raw.lrange("fleet:queue:t:dead", 0, -1) == ["not json"]


async def test_a_body_with_its_own_submit_time_keeps_it(
    rb: RedisBackend, raw: aioredis.Redis
) -> None:
    # Bodies written by hand, or by a Fleet before the record-only layout, carry
    # enqueued_at themselves; readers keep it, with or without a record.
    await raw.rpush("fleet:queue:t", json.dumps({"id": "old", "payload": 1, "enqueued_at": 123.5}))
    assert (await rb.queues.depths("t")).oldest_pending_age == pytest.approx(now() - 123.5, abs=5)
    got = await rb.queues.reserve("t", k=1)
    assert [(r.body.id, r.body.enqueued_at) for r in got] == [("old", 123.5)]
    body = await rb.browse.body("t", "old")
    assert body is not None and body.enqueued_at == 123.5


async def test_pool_keys(rb: RedisBackend, raw: aioredis.Redis) -> None:
    item_id = await rb.pools.put("cookies", {"c": 1}, {"site": "a.com"}, ttl_seconds=100)
    stored = json.loads(await raw.hget("fleet:pool:cookies", item_id))
    assert json.loads(base64.b64decode(stored["p"])) == {"c": 1}
    assert stored["t"] == {"site": "a.com"} and stored["x"] > 0
    claim = await rb.pools.claim("cookies", hold_seconds=30)
    assert claim is not None
    key = f"fleet:pool:cookies:claim:{item_id}"
    assert await raw.get(key) == claim.token
    assert 29_000 < await raw.pttl(key) <= 30_000
    assert await rb.pools.release("cookies", item_id, claim.token)
    assert await raw.exists(key) == 0
    assert await raw.smembers("fleet:pools") == {"cookies"}
    assert await rb.pools.drop("cookies") == 1
    assert await raw.keys("fleet:pool:*") == []


async def test_primitive_worker_and_stream_keys(rb: RedisBackend, raw: aioredis.Redis) -> None:
    assert await rb.locks.acquire("L", "tok", 10)
    assert await raw.get("fleet:lock:L") == "tok"
    await rb.counters.incr("C", 3)
    assert await raw.get("fleet:counter:C") == "3"
    await rb.kv.set("ns", "k", "v", ttl_seconds=10)
    assert await raw.get("fleet:kv:ns:k") == "v" and await raw.ttl("fleet:kv:ns:k") > 0
    await rb.catalog.put("t", {"config": {}})
    assert json.loads(await raw.hget("fleet:catalog", "t")) == {"config": {}}
    await rb.workers.register("t", "w1", {"host": "h"})
    await rb.workers.set_state("t", "w1", {"state": "IDLE", "last_seen": "1"})
    await rb.workers.put_stats("t", "w1", {"ts": 1})
    assert await rb.configs.put_desired("t", "w1", {"slots": 2}, 7)
    assert json.loads(await raw.get("wkr:t:w1:hardware")) == {"host": "h"}
    assert await raw.hgetall("wkr:t:w1:state") == {"state": "IDLE", "last_seen": "1"}
    assert json.loads(await raw.get("wkr:t:w1:stats")) == {"ts": 1}
    assert json.loads(await raw.get("wkr:t:w1:config")) == {"slots": 2}
    assert await raw.get("wkr:t:w1:gen") == "7"
    assert await raw.smembers("wkrs:t") == {"w1"}
    assert await raw.smembers("wkrs:all") == {"t|w1"}
    entry = await rb.streams.push("t", {"out": 1}, worker_id="w1")
    members = await raw.zrange("stream:t", 0, -1, withscores=True)
    assert json.loads(members[0][0]) == entry.to_dict()
    assert members[0][1] == pytest.approx(entry.ts)


async def test_purge_type_leaves_no_key(rb: RedisBackend, raw: aioredis.Redis) -> None:
    await rb.queues.push("t", [req("a"), req("b", 1), req("c", -1), req("d", delay=5)])
    await rb.queues.push("t", [PushRequest(TaskBody(id="e", payload=1), idempotency_key="k")])
    res = await rb.queues.reserve("t", k=1)
    await rb.queues.ack("t", [(res[0].body.id, res[0].token)])
    await rb.streams.push("t", 1, worker_id="w")
    await rb.configs.set("t", {"a": 1})
    await rb.configs.set("t", {"a": 2}, worker_id="w")
    await rb.configs.next_generation("t")
    await rb.workers.register("t", "w", {})
    await rb.workers.register("other", "w", {})
    await rb.catalog.put("t", {})
    await rb.purge_type("t")
    left = sorted(await raw.keys("*"))
    assert left == ["wkr:other:w:hardware", "wkrs:all", "wkrs:other"]
    assert await raw.smembers("wkrs:all") == {"other|w"}


async def test_payloads_and_ids_survive_byte_for_byte(rb: RedisBackend) -> None:
    payload = {"big": 12345678901234567890, "f": 0.1, "emoji": '😀 ü \\ " /', "e": [], "o": {}}
    task_id = 'id "quoted" \\ ü 😀'
    await rb.queues.push("t", [PushRequest(TaskBody(id=task_id, payload=payload, ttl_seconds=60))])
    got = await rb.queues.reserve("t")
    assert got[0].body.id == task_id
    assert got[0].body.payload == payload
    assert json.dumps(got[0].body.payload) == json.dumps(payload)
    assert (await rb.queues.state("t", task_id)).state == "processing"
    assert await rb.queues.ack("t", [(task_id, got[0].token)]) == [True]
    assert (await rb.queues.state("t", task_id)).state == "done"


async def test_cancel_a_queued_task_whose_id_needs_escaping(rb: RedisBackend) -> None:
    odd = 'a "quoted" \\ id'
    await rb.queues.push("t", [req("x"), PushRequest(TaskBody(id=odd, payload=1)), req("y")])
    assert await rb.queues.cancel("t", odd) == "cancelled"
    got = await rb.queues.reserve("t", k=10)
    assert [r.body.id for r in got] == ["x", "y"]
    assert (await rb.queues.depths("t")).pending == 0


async def test_limiter_keys_carry_ttls_and_go_away(rb: RedisBackend, raw: aioredis.Redis) -> None:
    holders, tat = "fleet:limit:api:a:holders", "fleet:limit:api:a:tat"
    t0 = now()
    assert await rb.limits.acquire("api:a", "t1", interval=0.2, concurrency=2, hold_seconds=3) == 0
    assert (
        await rb.limits.acquire("api:a", "t2", interval=None, concurrency=2, hold_seconds=0.3) == 0
    )
    assert await raw.type(holders) == "zset" and await raw.type(tat) == "string"
    members = dict(await raw.zrange(holders, 0, -1, withscores=True))
    assert members == {"t1": pytest.approx(t0 + 3, abs=0.5), "t2": pytest.approx(t0 + 0.3, abs=0.5)}
    assert 2000 < await raw.pttl(holders) <= 3001  # the last hold's end (ms, rounded up)
    assert float(await raw.get(tat)) == pytest.approx(t0 + 0.2, abs=0.1)
    assert 0 < await raw.pttl(tat) <= 401  # one interval past the tat
    await asyncio.sleep(0.45)
    assert not await raw.exists(tat)
    assert await rb.limits.release("api:a", "t1")
    assert await raw.zrange(holders, 0, -1) == ["t2"]  # expired, dropped by the next acquire
    assert (
        await rb.limits.acquire("api:a", "t3", interval=None, concurrency=1, hold_seconds=0.2) == 0
    )
    assert await raw.zrange(holders, 0, -1) == ["t3"]
    assert 0 < await raw.pttl(holders) <= 201
    await asyncio.sleep(0.25)
    assert await raw.keys("fleet:limit:*") == []  # a dead holder's key expires by itself


async def test_history_keys(rb: RedisBackend, raw: aioredis.Redis) -> None:
    t = now()
    await rb.history.record("t", t, Reported())
    await rb.queues.push("t", [req("a"), req("b")])
    assert await rb.history.record("t", t, Reported(timed_out=1))
    minute, hour = bucket_start(t, 60), bucket_start(t, 3600)
    stored = await raw.hgetall("fleet:history:t:buckets")
    assert set(stored) == {"last", f"m:{minute}", f"h:{hour}"}
    values = [int(x) for x in stored[f"m:{minute}"].split(",")]
    assert len(values) == 22 and values[0] == 2 and values[7] == 1  # submitted, timed out
    assert stored["last"].startswith("2,0,0,0,0,0,0,1,")
    expiry = dict(await raw.zrange("fleet:history:t:expiry", 0, -1, withscores=True))
    assert expiry[f"m:{minute}"] == minute + MINUTE_KEEP_SECONDS
    assert 0 < await raw.ttl("fleet:history:t:buckets") <= 31 * 86_400
