"""Monitors by a real fleet: a ``fleet master`` (its sweeper checks the monitors) and a
``fleet worker`` process on Redis and SQLite. A parser that starts returning None for
``price`` mid-run fires ``max_null_rate`` while the run still runs (the master's sweep
kept the state and published it on the ``monitors`` topic), and an empty run fires
``min_items`` once it has ended."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fleet.backends import open_backend
from fleet.master.services import monitors as run_monitors
from tests.support.master_proc import MasterProcess
from tests.support.waits import until
from tests.worker.procs import WorkerProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

TYPE = "priced-pages"


async def test_monitors_fire_live_and_at_the_end(shared_url: str, tmp_path: Path) -> None:
    master = MasterProcess(shared_url, tmp_path, sweep_seconds=0.5)
    worker = WorkerProcess(shared_url, "tests.monitors.plugin", TYPE, "w1", tmp_path)
    try:
        await master.wait_ready()
        async with master.client() as http, await open_backend(shared_url) as b:
            await until(lambda: b.catalog.get(TYPE), timeout=30, what="the worker's type")

            async def create(name: str, monitors: dict[str, Any]) -> str:
                body: dict[str, Any] = {"name": name, "types": [TYPE], "monitors": monitors}
                r = await http.post("/api/v1/runs", json=body)
                assert r.status_code == 201, r.text
                return str(r.json()["run_id"])

            bad = await http.post(
                "/api/v1/runs", json={"types": [TYPE], "monitors": {"max_null_rate": {"cost": 1}}}
            )
            assert bad.status_code == 422
            assert bad.json()["detail"][0]["loc"] == ["body", "monitors", "max_null_rate", "cost"]

            prices = await create("prices", {"max_null_rate": {"price": 0.2}, "min_items": 10})
            tasks: list[dict[str, Any]] = [{"payload": {"n": n}, "run": prices} for n in range(60)]
            tasks.append({"payload": {"n": -1}, "run": prices, "delay_seconds": 3600})
            r = await http.post(f"/api/v1/automations/{TYPE}/tasks/batch", json={"tasks": tasks})
            assert r.status_code == 202, r.text

            async def firing() -> dict[str, Any] | None:
                raw = await b.kv.get(run_monitors.NAMESPACE, f"state:{prices}")
                if raw is None or '"firing"' not in raw:
                    return None
                return dict((await http.get(f"/api/v1/runs/{prices}")).json())

            record = await until(firing, timeout=30, what="max_null_rate firing, kept by the sweep")
            assert record["state"] == "running"
            shown = {m["monitor"]: m for m in record["monitors"]}
            assert shown["max_null_rate:price"]["state"] == "firing"
            assert shown["max_null_rate:price"]["value"] == pytest.approx(0.5)
            assert shown["min_items"]["state"] == "ok"  # judged at the end

            empty = await create("empty", {"min_items": 1})
            r = await http.post(
                f"/api/v1/automations/{TYPE}/tasks", json={"payload": {"n": -1}, "run": empty}
            )
            assert r.status_code == 202, r.text

            async def ended_and_judged() -> dict[str, Any] | None:
                raw = await b.kv.get(run_monitors.NAMESPACE, f"state:{empty}")
                if raw is None or '"final": true' not in raw:
                    return None
                return dict((await http.get(f"/api/v1/runs/{empty}")).json())

            record = await until(ended_and_judged, timeout=30, what="the empty run judged")
            assert record["state"] == "done"
            (m,) = record["monitors"]
            assert (m["monitor"], m["state"], m["value"]) == ("min_items", "firing", 0)
    finally:
        worker.close()
        master.close()
