"""``fleet_monitors_firing{monitor}`` on ``/metrics`` (docs/monitors.md), against a live
master over real HTTP, on SQLite and Redis: per monitor, how many of the newest runs
have it firing, read at scrape time from the states the sweeper keeps (KV
``fleet-monitors``, ``state:<run>``); a monitor declared and not firing shows 0, a run
without kept states or with an unreadable one counts for nothing, and a change shows at
the next scrape."""

from __future__ import annotations

import json
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from fleet.backends.base import Backend
from fleet.master.services import metrics
from fleet.master.services.monitors import NAMESPACE
from tests.master import live_backend
from tests.master.conftest import ADMIN, READ, auth

backend_url, live, http, backend = (
    live_backend.backend_url,
    live_backend.live,
    live_backend.http,
    live_backend.backend,
)


def _state(monitor: str, state: str, value: float | None, threshold: float) -> dict[str, Any]:
    return {
        "monitor": monitor,
        "state": state,
        "value": value,
        "threshold": threshold,
        "since": 1.0,
    }


async def _keep(b: Backend, run_id: str, *states: dict[str, Any]) -> None:
    value = {"states": list(states), "outputs": 0, "output_at": 1.0, "final": True}
    await b.kv.set(NAMESPACE, f"state:{run_id}", json.dumps(value), ttl_seconds=600)


async def firing(http: httpx.AsyncClient) -> dict[str, float]:
    r = await http.get("/metrics", headers=auth(READ))
    assert r.status_code == 200, r.text
    assert "# TYPE fleet_monitors_firing gauge" in r.text.splitlines()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            if s.name == "fleet_monitors_firing":
                assert set(s.labels) == {"monitor"}, s
                assert s.labels["monitor"] not in out
                out[s.labels["monitor"]] = s.value
    return out


async def test_fleet_monitors_firing_counts_the_newest_runs(
    http: httpx.AsyncClient, backend: Backend
) -> None:
    assert await firing(http) == {}  # no run: the family and no sample
    ids = []
    for n in range(5):
        r = await http.post("/api/v1/runs", json={"name": f"m{n}"}, headers=auth(ADMIN))
        assert r.status_code in (200, 201), r.text
        ids.append(r.json()["run_id"])
    a, b, c, d, e = ids
    await _keep(
        backend, a, _state("min_items", "firing", 2, 5), _state("max_error_rate", "ok", 0, 0.1)
    )
    await _keep(backend, b, _state("min_items", "firing", 0, 5))
    await _keep(
        backend,
        c,
        _state("min_items", "resolved", 7, 5),
        _state("max_null_rate:price", "firing", 0.5, 0.1),
    )
    await backend.kv.set(NAMESPACE, f"state:{d}", "{not json", ttl_seconds=600)
    # e: no kept states (no monitors, or not seen yet)
    assert await firing(http) == {
        "min_items": 2.0,
        "max_error_rate": 0.0,
        "max_null_rate:price": 1.0,
    }
    # The sweeper decides again: the next scrape shows it.
    await _keep(backend, b, _state("min_items", "resolved", 6, 5))
    await _keep(backend, e, _state("max_error_rate", "firing", 0.5, 0.1))
    assert await firing(http) == {
        "min_items": 1.0,
        "max_error_rate": 1.0,
        "max_null_rate:price": 1.0,
    }


async def test_a_scrape_reads_only_the_newest_runs(
    http: httpx.AsyncClient, backend: Backend, monkeypatch: Any
) -> None:
    ids = []
    for n in range(3):
        r = await http.post("/api/v1/runs", json={"name": f"m{n}"}, headers=auth(ADMIN))
        ids.append(r.json()["run_id"])
    for run_id in ids:
        await _keep(backend, run_id, _state("min_items", "firing", 0, 5))
    assert await firing(http) == {"min_items": 3.0}
    page = await backend.runs.page(limit=2)
    newest = {record.id for record in page.runs}
    monkeypatch.setattr(metrics, "MONITOR_RUNS", 2)
    assert await firing(http) == {"min_items": 2.0}
    assert len(newest) == 2 and newest <= set(ids)
