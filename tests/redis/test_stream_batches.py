"""Emits made while one is being written share one script call (slots emitting at once): every
entry lands, in its task's record too, each stream keeps its own trim settings, and a
failed call fails every emit of its batch. Single pushes made at once share one push
the same way (tests/conformance/test_queue_one_by_one.py); a failed one fails them all,
none queued."""

from __future__ import annotations

import asyncio

import pytest

from fleet.backends.redis import RedisBackend
from fleet.backends.redis.streams import EMIT_CHUNK
from fleet.core.errors import BackendUnavailable
from fleet.core.records import PushRequest, TaskBody
from tests.support.redis_server import REDIS_BIN, RedisServer

pytestmark = pytest.mark.skipif(REDIS_BIN is None, reason="redis-server not installed")


async def _script_calls(rb: RedisBackend) -> int:
    stats = await rb._r.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("fcall", "evalsha"))


async def test_emits_made_at_once_share_a_call_and_all_land(rb: RedisBackend) -> None:
    n = EMIT_CHUNK + 100  # the first alone, then the 299 that waited for it: 200 + 99
    await rb.streams.push("warm", {}, worker_id="w")  # the script is loaded by now
    before = await _script_calls(rb)
    entries = await asyncio.gather(
        *(
            rb.streams.push("t", {"i": i}, worker_id="w", task_id=f"task{i % 3}", attempt=1)
            for i in range(n)
        )
    )
    assert await _script_calls(rb) - before == 3
    assert await rb.streams.length("t") == n
    stored = {e.payload["i"] for e in await rb.streams.peek("t", n)}
    assert stored == set(range(n)) and len({e.id for e in entries}) == n
    for k in range(3):
        record = rb._keys.task_record("t", f"task{k}")
        assert int(await rb._r.hget(record, "n")) == len(range(k, n, 3))
        assert await rb._r.llen(record + ":out") == min(len(range(k, n, 3)), 100)
    # one more emit, alone: a call of its own
    await rb.streams.push("t", {"i": n}, worker_id="w")
    assert await rb.streams.length("t") == n + 1


async def test_each_stream_keeps_its_own_trim_in_a_shared_turn(rb: RedisBackend) -> None:
    await asyncio.gather(
        *(rb.streams.push("short", {"i": i}, worker_id="w", max_len=5) for i in range(20)),
        *(rb.streams.push("long", {"i": i}, worker_id="w", max_len=50) for i in range(20)),
    )
    assert await rb.streams.length("short") == 5
    assert [e.payload["i"] for e in await rb.streams.peek("short", 10)] == [15, 16, 17, 18, 19]
    assert await rb.streams.length("long") == 20


async def test_a_failed_call_fails_every_emit_of_its_batch(own_server: RedisServer) -> None:
    b = RedisBackend(own_server.url)
    await b.connect()
    try:
        await b.streams.push("t", {"i": -1}, worker_id="w")
        own_server.stop(kill=True)
        results = await asyncio.gather(
            *(b.streams.push("t", {"i": i}, worker_id="w") for i in range(10)),
            return_exceptions=True,
        )
        assert all(isinstance(r, BackendUnavailable) for r in results), results
        own_server.start()
        await b.streams.push("t", {"i": 0}, worker_id="w")  # the same backend works again
        assert await b.streams.length("t") == 1
    finally:
        await b.close()


def single(task_id: str) -> PushRequest:
    return PushRequest(TaskBody(id=task_id, payload=1))


async def test_a_failed_push_step_fails_every_single_push_in_it(own_server: RedisServer) -> None:
    b = RedisBackend(own_server.url)
    await b.connect()
    try:
        await b.queues.push_one("t", PushRequest(TaskBody(id="before", payload=0)))
        own_server.stop(kill=True)
        results = await asyncio.gather(
            *(b.queues.push_one("t", single(f"p{i}")) for i in range(9)),
            return_exceptions=True,
        )
        assert all(isinstance(r, BackendUnavailable) for r in results), results
        own_server.start()  # same port, empty data: none of the ten was queued anywhere
        assert await b.queues.push_one("t", PushRequest(TaskBody(id="after", payload=0)))
        assert [r.body.id for r in await b.queues.reserve("t", k=20)] == ["after"]
    finally:
        await b.close()
