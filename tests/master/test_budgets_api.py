"""Budgets over REST against a live master (docs/costs.md), on SQLite and Redis: a
run's budget, pause and resume (with the 409 and 422 paths), and a type's
``daily_budget``: held by the meters past it, shown by ``/costs``, ended by a config
write that raises it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core import clock
from fleet.core.meters import MeterBatch, hour_scope, run_scope, type_scope
from fleet.core.records import PushRequest, TaskBody, new_id
from tests.master import live_backend
from tests.master.conftest import ADMIN, READ, auth
from tests.master.plugins import SCRAPE
from tests.master.test_metrics_events import EventReader

backend_url, live, http, backend = (
    live_backend.backend_url,
    live_backend.live,
    live_backend.http,
    live_backend.backend,
)
A = f"/api/v1/automations/{SCRAPE}"


async def test_run_budget_pause_and_resume(http: httpx.AsyncClient, backend: Backend) -> None:
    r = await http.post("/api/v1/runs", json={"budget": {"bytes": 1e6}}, headers=auth(ADMIN))
    assert r.status_code == 201, r.text
    run = r.json()["run_id"]
    for bad in ({"bytes": -1}, {}, {"Not A Meter": 1}):
        r = await http.post("/api/v1/runs", json={"budget": bad}, headers=auth(ADMIN))
        assert r.status_code == 422, (bad, r.text)
    body = TaskBody(
        id=new_id(), payload={"url": "http://x.test/"}, enqueued_at=clock.now(), run=run
    )
    await backend.queues.push(SCRAPE, [PushRequest(body)])
    got = (await http.get(f"/api/v1/runs/{run}", headers=auth(READ))).json()
    assert got["budget"] == {"bytes": 1e6} and got["budget_left"] == {"bytes": 1e6}

    r = await http.post(f"/api/v1/runs/{run}/pause", headers=auth(READ))
    assert r.status_code == 403  # an admin action
    r = await http.post(
        f"/api/v1/runs/{run}/pause", json={"reason": "look at it"}, headers=auth(ADMIN)
    )
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "paused" and r.json()["paused_reason"] == "look at it"
    assert await backend.queues.reserve(SCRAPE, k=5, visibility_seconds=30) == []

    # Its meters reach the budget: a resume that keeps it is refused, a raised one goes.
    await backend.meters.add(MeterBatch({run_scope(run): {"bytes_received": 1.5e6}}))
    r = await http.post(f"/api/v1/runs/{run}/resume", headers=auth(ADMIN))
    assert r.status_code == 422 and "raised budget" in r.text, r.text
    r = await http.post(
        f"/api/v1/runs/{run}/resume", json={"budget": {"bytes": 5e6}}, headers=auth(ADMIN)
    )
    assert r.status_code == 200, r.text
    shown = r.json()
    assert shown["state"] == "running" and shown["budget_left"] == {"bytes": 3.5e6}
    assert len(await backend.queues.reserve(SCRAPE, k=5, visibility_seconds=30)) == 1

    r = await http.delete(f"/api/v1/runs/{run}", headers=auth(ADMIN))
    assert r.status_code == 200
    for action in ("pause", "resume"):
        r = await http.post(f"/api/v1/runs/{run}/{action}", headers=auth(ADMIN))
        assert r.status_code == 409, r.text
    r = await http.post(f"/api/v1/runs/{'0' * 32}/pause", headers=auth(ADMIN))
    assert r.status_code == 404
    r = await http.post("/api/v1/runs/nope/resume", headers=auth(ADMIN))
    assert r.status_code == 422


async def test_a_daily_budget_holds_the_type_until_raised(
    http: httpx.AsyncClient, backend: Backend
) -> None:
    r = await http.patch(
        f"{A}/config", json={"daily_budget": {"requests": -3}}, headers=auth(ADMIN)
    )
    assert r.status_code == 422, r.text
    r = await http.patch(
        f"{A}/config", json={"daily_budget": {"requests": 10}}, headers=auth(ADMIN)
    )
    assert r.status_code == 200, r.text
    hour = hour_scope(SCRAPE, clock.now())
    await backend.meters.add(
        MeterBatch({type_scope(SCRAPE): {"requests": 12}, hour: {"requests": 12}})
    )
    got = (await http.get(f"{A}/costs", headers=auth(READ))).json()
    assert got["today"] == {"requests": 12.0}
    assert got["held"]["reason"] == "daily budget reached: requests 12 of 10"
    # Raised, but not above the day's 12: still held; above it: released before the 200.
    r = await http.patch(
        f"{A}/config", json={"daily_budget": {"requests": 11}}, headers=auth(ADMIN)
    )
    assert r.status_code == 200
    assert (await http.get(f"{A}/costs", headers=auth(READ))).json()["held"] is not None
    r = await http.patch(
        f"{A}/config", json={"daily_budget": {"requests": 50}}, headers=auth(ADMIN)
    )
    assert r.status_code == 200
    assert (await http.get(f"{A}/costs", headers=auth(READ))).json()["held"] is None
    assert await backend.meters.held(SCRAPE) is None


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
async def test_the_event_stream_says_paused_resumed_and_held(
    live_factory: Any, sqlite_url: str, request: pytest.FixtureRequest, kind: str
) -> None:
    url = sqlite_url if kind == "sqlite" else request.getfixturevalue("redis_url")
    live = live_factory(url, sweeper=False)
    worker_side = await open_backend(url)
    try:
        async with (
            httpx.AsyncClient(base_url=live.url, headers=auth(ADMIN), timeout=30) as client,
            client.stream("GET", "/api/v1/events?interval=5") as response,
        ):
            events = EventReader(response)
            await events.next("hello")
            r = await client.post("/api/v1/runs", json={"budget": {"requests": 3}})
            run = r.json()["run_id"]
            # A budget reached in the step that adds the meters (a worker's flush).
            await worker_side.meters.add(MeterBatch({run_scope(run): {"requests": 3}}))
            paused = await events.next("run")
            assert paused["event"] == "paused" and paused["run_id"] == run
            assert paused["paused_reason"] == "budget reached: requests 3 of 3"
            r = await client.post(f"/api/v1/runs/{run}/resume", json={"budget": {"requests": 9}})
            assert r.status_code == 200, r.text
            resumed = await events.next("run")
            assert resumed["event"] == "resumed" and resumed["state"] == "running"
            # A type's daily budget: the hold is an event of its own.
            r = await client.patch(f"{A}/config", json={"daily_budget": {"spend": 1}})
            assert r.status_code == 200, r.text
            hour = hour_scope(SCRAPE, clock.now())
            await worker_side.meters.add(MeterBatch({hour: {"spend": 2.5}}))
            held = await events.next("budget")
            assert held["event"] == "paused" and held["type"] == SCRAPE
            assert held["reason"] == "daily budget reached: spend 2.5 of 1"
    finally:
        await worker_side.close()
