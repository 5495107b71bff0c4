"""A real uvicorn master over real HTTP, on SQLite and on Redis."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from tests.master.conftest import ADMIN, auth
from tests.master.plugins import SCRAPE

H = auth(ADMIN)
TASKS = f"/api/v1/automations/{SCRAPE}/tasks"


@pytest.fixture(params=["sqlite", "redis"])
def live_url(request: pytest.FixtureRequest, sqlite_url: str) -> str:
    if request.param == "sqlite":
        return sqlite_url
    url: str = request.getfixturevalue("redis_url")
    return url


async def test_concurrent_idempotent_submits_queue_exactly_once(
    live_factory: Any, live_url: str
) -> None:
    live = live_factory(live_url, sweeper=False)
    body = {"payload": {"url": "u"}, "idempotency_key": "once"}
    async with httpx.AsyncClient(base_url=live.url, headers=H, timeout=30) as client:
        answers = await asyncio.gather(*(client.post(TASKS, json=body) for _ in range(20)))
        assert {a.status_code for a in answers} == {202}
        results = [a.json() for a in answers]
        assert sum(r["queued"] for r in results) == 1
        assert sum(r["duplicate"] for r in results) == 19
        assert len({r["task_id"] for r in results}) == 1
        queue = (await client.get(f"/api/v1/automations/{SCRAPE}/queue")).json()
        assert queue["pending_total"] == 1 and queue["counters"]["submitted"] == 1


async def test_live_routes_status_codes(live_factory: Any, live_url: str) -> None:
    live = live_factory(live_url, sweeper=False)
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as client:
        assert (await client.get("/healthz")).status_code == 200
        assert (await client.get("/readyz")).status_code == 200
        assert (await client.get("/api/v1/openapi.json")).status_code == 200
        assert (await client.get("/api/v1/catalog")).status_code == 401
        r = await client.post(TASKS, json={"payload": {"depth": 1}}, headers=H)
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "payload", "url"]
        r = await client.post(
            f"{TASKS}/batch",
            json={"tasks": [{"payload": {"url": str(i)}} for i in range(500)]},
            headers=H,
        )
        assert r.status_code == 202 and all(x["queued"] for x in r.json()["results"])
        big = b'{"payload": {"url": "' + b"x" * (2 << 20) + b'"}}'
        r = await client.post(TASKS, content=big, headers={**H, "Content-Type": "application/json"})
        assert r.status_code == 413
        r = await client.get(f"/api/v1/automations/{SCRAPE}/queue", headers=H)
        assert r.json()["pending_total"] == 500
