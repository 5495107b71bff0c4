"""The backend loses its data under a live master and a real worker (FLUSHALL on Redis,
every table emptied on SQLite): within seconds the worker's registration, catalog entry,
config and drain flag are back, and config generations never go backwards."""

from __future__ import annotations

import sqlite3
import subprocess
import time
from typing import Any

import httpx
import redis

from tests.master.conftest import ADMIN, auth
from tests.master.test_e2e_worker import E2E, backend_for_e2e, eventually, worker

__all__ = ["backend_for_e2e", "worker"]  # fixtures shared with the e2e test

BASE = f"/api/v1/automations/{E2E}"


def lose_everything(url: str) -> None:
    if url.startswith("redis"):
        client = redis.Redis.from_url(url)
        client.flushall()
        client.close()
        return
    path = url.removeprefix("sqlite:///")
    with sqlite3.connect(path, timeout=10) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            if table != "meta":  # the schema version: a restore keeps the schema
                conn.execute(f"DELETE FROM {table}")


async def test_a_fleet_heals_after_its_backend_loses_its_data(
    live_factory: Any, backend_for_e2e: str, worker: subprocess.Popen[str]
) -> None:
    live = live_factory(backend_for_e2e, sweeper=False)
    async with httpx.AsyncClient(base_url=live.url, headers=auth(ADMIN), timeout=30) as c:

        async def view() -> dict[str, Any] | None:
            r = await c.get(f"{BASE}/workers/w-e2e")
            return r.json() if r.status_code == 200 else None

        async def applied(gen: int) -> bool:
            v = await view()
            return v is not None and v["gen"]["applied"] == gen

        await eventually(lambda: _up(c), "the worker to be up")
        for label in ("one", "two", "three"):
            r = await c.patch(f"{BASE}/config", json={"slots": 2, "label": label})
            assert r.status_code == 200, r.text
        held = r.json()["gen"]
        await eventually(lambda: applied(held), "the worker to apply the config")
        assert (await c.post(f"{BASE}/workers/w-e2e/drain")).status_code == 200
        await eventually(lambda: _draining(c), "the drain to be seen")

        async def drains() -> bool:  # the worker holds the drain (what it restores)
            v = await view()
            return v is not None and v["reported_state"] == "DRAINING"

        await eventually(drains, "the worker to drain")

        lose_everything(backend_for_e2e)
        lost_at = time.monotonic()

        async def submits() -> bool:
            r = await c.post(f"{BASE}/tasks", json={"payload": {"n": 1}})
            assert r.status_code in (202, 404), r.text
            return r.status_code == 202

        await eventually(submits, "submits to be accepted again", timeout=10)
        healed = time.monotonic() - lost_at
        assert healed < 5, healed  # the worker re-published its catalog entry
        await eventually(lambda: _draining(c), "the drain flag to come back", timeout=5)
        # The config the API shows is the one the worker runs, not the defaults.
        r = await c.get(f"{BASE}/config")
        assert r.status_code == 200 and r.json()["config"]["label"] == "three", r.text
        v = await view()
        assert v is not None and v["gen"]["applied"] == held

        # A change after the loss reaches the worker at once: its generation is above
        # the one the worker holds, although the backend's counter started again.
        assert (await c.post(f"{BASE}/workers/w-e2e/resume")).status_code == 200
        r = await c.patch(f"{BASE}/config", json={"label": "after"})
        assert r.status_code == 200 and r.json()["workers"] == ["w-e2e"], r.text
        after = r.json()["gen"]
        assert after > held
        await eventually(lambda: applied(after), "the worker to apply the change", timeout=10)


async def _up(c: httpx.AsyncClient) -> bool:
    r = await c.get(f"{BASE}/workers")
    return r.status_code == 200 and any(v["up"] for v in r.json())


async def _draining(c: httpx.AsyncClient) -> bool:
    r = await c.get(f"{BASE}/workers/w-e2e")
    return r.status_code == 200 and bool(r.json().get("draining_requested"))
