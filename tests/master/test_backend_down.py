"""The master while its Redis is down: /readyz 503, API 503, no 500; recovery after."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.master.conftest import ADMIN, auth
from tests.master.plugins import SCRAPE
from tests.support.redis_server import REDIS_BIN, RedisServer

pytestmark = pytest.mark.skipif(REDIS_BIN is None, reason="redis-server not installed")


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    yield server
    server.cleanup()


async def test_backend_outage_is_503_and_recovers(
    live_factory: Any, own_redis: RedisServer
) -> None:
    live = live_factory(own_redis.url, sweeper=False, catalog_check_seconds=0.2)
    tasks = f"/api/v1/automations/{SCRAPE}/tasks"
    async with httpx.AsyncClient(base_url=live.url, headers=auth(ADMIN), timeout=30) as client:
        assert (await client.get("/readyz")).status_code == 200
        own_redis.stop()
        r = await client.get("/readyz")
        assert r.status_code == 503 and r.json()["backend"] == "down"
        assert (await client.get("/healthz")).status_code == 200
        r = await client.post(tasks, json={"payload": {"url": "u"}})
        assert r.status_code == 503, r.text
        r = await client.get("/metrics")
        assert r.status_code == 200 and "fleet_backend_up 0.0" in r.text
        own_redis.start()
        assert (await client.get("/readyz")).status_code == 200
        # The catalog lived in the Redis that went away (no persistence); the master
        # re-publishes the entries of its own plugins, so submits work again.
        deadline = time.monotonic() + 10
        while (await client.get(f"/api/v1/catalog/{SCRAPE}")).status_code == 404:
            assert time.monotonic() < deadline, "catalog entry not re-published"
            await asyncio.sleep(0.05)
        r = await client.post(tasks, json={"payload": {"url": "u"}})
        assert r.status_code == 202


async def test_event_stream_says_why_it_ends(live_factory: Any, own_redis: RedisServer) -> None:
    from tests.master.test_metrics_events import EventReader

    live = live_factory(own_redis.url, sweeper=False)
    async with (
        httpx.AsyncClient(base_url=live.url, headers=auth(ADMIN), timeout=30) as client,
        client.stream("GET", "/api/v1/events?interval=0.2") as response,
    ):
        events = EventReader(response)
        await events.next("hello")
        own_redis.stop()
        error = await events.next("error")
        assert "backend unavailable" in error["detail"]
