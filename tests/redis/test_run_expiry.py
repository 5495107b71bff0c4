"""Runs on Redis expire when idle, all their keys together (lua/run_common.lua
``run_touch``), and a run's callback never reaches a key outside its type's queue."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from fleet.backends.redis import RedisBackend
from fleet.core.records import PushRequest, TaskBody
from fleet.core.submission import make_push_request

TYPE = "run-expiry"


@pytest.fixture
async def idle_rb(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[RedisBackend]:
    monkeypatch.setenv("FLEET_RUN_IDLE_TTL_SECONDS", "0.5")
    backend = RedisBackend(redis_url)  # its scripts take the setting at load
    await backend.connect()
    try:
        yield backend
    finally:
        await backend.close()


async def test_a_run_and_its_keys_expire_together(
    idle_rb: RedisBackend, raw: aioredis.Redis
) -> None:
    run = await idle_rb.runs.create()
    await idle_rb.queues.push(TYPE, [make_push_request({}, run=run, unique_key="k")])
    keys = [f"fleet:run:{run}", f"fleet:run:{run}:live", f"fleet:run:{run}:keys:0"]
    for key in keys:
        assert 0 < await raw.pttl(key) <= 500, key
    await asyncio.sleep(0.3)
    got = (await idle_rb.queues.reserve(TYPE, k=1))[0]  # a move: all of them live on
    for key in keys:
        assert 300 < await raw.pttl(key) <= 500, key
    await asyncio.sleep(0.8)
    assert not await raw.exists(*keys)
    await idle_rb.queues.ack(TYPE, [(got.body.id, got.token)])  # finds no run
    assert not await raw.exists(*keys)


async def test_an_ended_run_keeps_its_run_ttl(idle_rb: RedisBackend, raw: aioredis.Redis) -> None:
    run = await idle_rb.runs.create()
    await idle_rb.queues.push(TYPE, [make_push_request({}, run=run)])
    got = (await idle_rb.queues.reserve(TYPE, k=1))[0]
    await idle_rb.queues.ack(TYPE, [(got.body.id, got.token)])
    assert await raw.pttl(f"fleet:run:{run}") > 86_400_000  # FLEET_RUN_TTL_SECONDS, 7 days


async def test_a_stored_callback_type_that_is_no_type_name_is_not_pushed(
    rb: RedisBackend, raw: aioredis.Redis
) -> None:
    """A run stored before on_complete.type was checked, naming ``sec-cb:counters``:
    its end leaves ``fleet:queue:sec-cb:counters`` (a hash) alone."""
    await rb.queues.push("sec-cb", [PushRequest(TaskBody(id="t", payload={}))])
    run = await rb.runs.create(on_complete={"type": "sec-cb"})
    await raw.hset(f"fleet:run:{run}", "oc", '{"type": "sec-cb:counters", "payload": {}}')
    await rb.queues.push(TYPE, [make_push_request({}, run=run)])
    got = (await rb.queues.reserve(TYPE, k=1))[0]
    await rb.queues.ack(TYPE, [(got.body.id, got.token)])
    record = await rb.runs.get(run)
    assert record is not None and record.state == "done"
    assert await raw.type("fleet:queue:sec-cb:counters") == "hash"
    assert (await rb.queues.depths("sec-cb")).pending == 1
