"""``GET /api/v1/pools[/{name}]`` tell an existing but empty pool (200, zeros) from an
unknown one (404), alike on memory, SQLite and Redis.

A pool exists when a catalogued automation declares it, or while it holds unexpired
items. The declaring entry is published here as a worker on another machine would
publish it: built from a class by ``catalog_entry`` and written to the catalog.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Pool
from fleet.core.catalog import catalog_entry
from fleet.core.clock import ManualClock
from fleet.core.context import Context
from fleet.core.tasks import Task
from tests.master.conftest import ADMIN, InProcess, auth, settings_for, start_in_process

H = auth(ADMIN)
DECLARED = "declared-cookies"


class Cookie(BaseModel):
    value: str


class Site(BaseModel):
    site: str


class Query(BaseModel):
    url: str


class Harvester(BatchAutomation[BaseConfig]):
    """Declares a pool; never registered in this process (a remote worker's type)."""

    automation_type = "pool-owner"
    TaskPayload = Query
    Pools = {"cookies": Pool[Cookie, Site](DECLARED, payload=Cookie, tags=Site)}

    async def run_one(self, task: Task[Any], ctx: Context[BaseConfig]) -> None:
        return None


@pytest.fixture
async def master(backend_url: str) -> AsyncIterator[InProcess]:
    """An in-process master on a fresh backend of each kind, a pool declared."""
    inproc, lifespan = await start_in_process(settings_for(backend_url), sweeper=False)
    await inproc.backend.catalog.put(Harvester.automation_type, catalog_entry(Harvester))
    try:
        yield inproc
    finally:
        await inproc.client.aclose()
        await lifespan.__aexit__(None, None, None)


ZEROS = {"total": 0, "available": 0, "claimed": 0, "expiring_soon": 0}
#: Pools of this test; others are declared by automations other test modules registered
#: in this process (the in-process master publishes them to the catalog).
MINE = {DECLARED, "adhoc", "held"}


def listed(response: httpx.Response) -> list[dict[str, Any]]:
    return [p for p in response.json() if p["name"] in MINE]


async def test_declared_empty_pool_is_200_and_unknown_pool_is_404(master: InProcess) -> None:
    r = await master.client.get(f"/api/v1/pools/{DECLARED}", headers=H)
    assert r.status_code == 200, r.text
    assert r.json() == {"name": DECLARED, **ZEROS, "items": []}
    assert listed(await master.client.get("/api/v1/pools", headers=H)) == [
        {"name": DECLARED, **ZEROS}
    ]

    r = await master.client.get("/api/v1/pools/never-heard-of", headers=H)
    assert r.status_code == 404
    assert r.json()["detail"].startswith("unknown pool 'never-heard-of'")


async def test_declared_pool_stays_after_its_items_go(master: InProcess) -> None:
    b = master.backend
    await b.pools.put(DECLARED, {"value": "v"}, {"site": "a"})
    r = await master.client.get(f"/api/v1/pools/{DECLARED}", headers=H)
    assert r.json()["total"] == 1 and len(r.json()["items"]) == 1
    assert (await master.client.delete(f"/api/v1/pools/{DECLARED}", headers=H)).json() == {
        "dropped": 1
    }
    r = await master.client.get(f"/api/v1/pools/{DECLARED}", headers=H)
    assert r.status_code == 200 and r.json()["total"] == 0 and r.json()["items"] == []


async def test_undeclared_pool_exists_while_it_holds_unexpired_items(
    master: InProcess, frozen: ManualClock
) -> None:
    b = master.backend
    await b.pools.put("adhoc", {"value": "v"}, {"site": "a"}, ttl_seconds=3.0)
    claimed_id = await b.pools.put("held", {"value": "w"}, {"site": "b"})
    assert await b.pools.claim("held") is not None
    r = await master.client.get("/api/v1/pools", headers=H)
    assert [p["name"] for p in listed(r)] == ["adhoc", DECLARED, "held"]
    # A claimed item still makes its pool exist (it is only not available).
    r = await master.client.get("/api/v1/pools/held", headers=H)
    assert r.status_code == 200 and (r.json()["total"], r.json()["claimed"]) == (1, 1)
    assert r.json()["items"] == []

    frozen.advance(3.2)  # adhoc's only item expires; no backend has pruned it yet
    r = await master.client.get("/api/v1/pools/adhoc", headers=H)
    assert r.status_code == 404, r.text
    r = await master.client.get("/api/v1/pools", headers=H)
    assert [p["name"] for p in listed(r)] == [DECLARED, "held"]

    assert await b.pools.remove("held", claimed_id)
    assert (await master.client.get("/api/v1/pools/held", headers=H)).status_code == 404
