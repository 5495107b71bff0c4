"""The event stream relays a run's end as the event ``run`` (SQLite; memory publishes
the same topic; Redis does not publish it yet)."""

from __future__ import annotations

from typing import Any

import httpx

from fleet.backends import open_backend
from fleet.core.submission import make_push_request
from tests.master.conftest import ADMIN, auth
from tests.master.plugins import SCRAPE
from tests.master.test_metrics_events import EventReader

H = auth(ADMIN)


async def test_a_run_ending_is_an_event(live_factory: Any, sqlite_url: str) -> None:
    live = live_factory(sqlite_url, sweeper=False)
    worker_side = await open_backend(sqlite_url)
    try:
        async with (
            httpx.AsyncClient(base_url=live.url, headers=H, timeout=30) as client,
            client.stream("GET", "/api/v1/events?interval=0.3") as response,
        ):
            events = EventReader(response)
            await events.next("hello")
            run = (await client.post("/api/v1/runs", json={"name": "r"})).json()["run_id"]
            await worker_side.push(SCRAPE, [make_push_request({"url": "u"}, run=run)])
            got = await worker_side.reserve(SCRAPE, k=1)
            await worker_side.ack(SCRAPE, [(got[0].body.id, got[0].token)])
            ended = await events.next("run")
            assert ended["run_id"] == run and ended["event"] == "ended"
            assert ended["state"] == "done" and ended["counters"]["done"] == 1
    finally:
        await worker_side.close()
