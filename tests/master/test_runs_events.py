"""The event stream relays a run's end (done, or cancelled) as the event ``run``, on
SQLite and Redis (memory publishes the same topic)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from fleet.backends import open_backend
from fleet.core.submission import make_push_request
from tests.master.conftest import ADMIN, auth
from tests.master.plugins import SCRAPE
from tests.master.test_metrics_events import EventReader

H = auth(ADMIN)


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
async def test_a_run_ending_is_an_event(
    live_factory: Any, sqlite_url: str, request: pytest.FixtureRequest, kind: str
) -> None:
    url = sqlite_url if kind == "sqlite" else request.getfixturevalue("redis_url")
    live = live_factory(url, sweeper=False)
    worker_side = await open_backend(url)
    try:
        async with (
            httpx.AsyncClient(base_url=live.url, headers=H, timeout=30) as client,
            client.stream("GET", "/api/v1/events?interval=0.3") as response,
        ):
            events = EventReader(response)
            await events.next("hello")
            run = (await client.post("/api/v1/runs", json={"name": "r"})).json()["run_id"]
            await worker_side.queues.push(SCRAPE, [make_push_request({"url": "u"}, run=run)])
            got = await worker_side.queues.reserve(SCRAPE, k=1)
            await worker_side.queues.ack(SCRAPE, [(got[0].body.id, got[0].token)])
            ended = await events.next("run")
            assert ended["run_id"] == run and ended["event"] == "ended"
            assert ended["state"] == "done" and ended["counters"]["done"] == 1
            assert ended["by_type"][SCRAPE]["done"] == 1 and ended["name"] == "r"
            cancelled = (await client.post("/api/v1/runs", json={})).json()["run_id"]
            await client.delete(f"/api/v1/runs/{cancelled}")
            ended = await events.next("run")
            assert ended["run_id"] == cancelled and ended["state"] == "cancelled"
    finally:
        await worker_side.close()
