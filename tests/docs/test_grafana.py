"""docs/grafana: the dashboard JSON and the alert rules parse, and every metric their
PromQL names exists on a real master's ``/metrics`` after real work (a live master and
a real ``fleet worker`` process that ran, failed, dead-lettered and is running tasks of
a group and a run)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from fleet.backends import open_backend
from fleet.master.services import monitors
from tests.master.conftest import ADMIN, auth, live_factory, sqlite_url
from tests.master.test_e2e_worker import E2E, backend_for_e2e, eventually, worker

__all__ = ["backend_for_e2e", "live_factory", "sqlite_url", "worker"]  # fixtures used here

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "docs" / "grafana" / "fleet-dashboard.json"
ALERTS = ROOT / "docs" / "grafana" / "alerts.yml"
# Every Fleet metric starts with fleet_; PromQL functions, labels and label values
# used in these files never do.
METRIC = re.compile(r"\bfleet_[A-Za-z0-9_:]*")
SLOW = 999  # the e2e plugin's job that runs until cancelled


def _dashboard_exprs(node: Any) -> list[str]:
    """Every PromQL text of the dashboard: panel targets and variable queries."""
    out: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "definition") and isinstance(value, str):
                out.append(value)
            elif key == "query" and isinstance(value, str | dict):
                out += [value] if isinstance(value, str) else _dashboard_exprs(value)
            else:
                out += _dashboard_exprs(value)
    elif isinstance(node, list):
        for item in node:
            out += _dashboard_exprs(item)
    return out


def _alert_exprs() -> list[str]:
    rules = yaml.safe_load(ALERTS.read_text("utf-8"))
    out = []
    for group in rules["groups"]:
        assert group["name"] and group["rules"]
        for rule in group["rules"]:
            assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
            assert rule["alert"] and rule["annotations"]["summary"]
            out.append(str(rule["expr"]))
    return out


def used_metrics() -> set[str]:
    """The metric names the dashboard's and the alerts' PromQL read."""
    dashboard = json.loads(DASHBOARD.read_text("utf-8"))
    exprs = _dashboard_exprs(dashboard) + _alert_exprs()
    return {name for e in exprs for name in METRIC.findall(e)}


def test_dashboard_and_alerts_parse() -> None:
    dashboard = json.loads(DASHBOARD.read_text("utf-8"))
    assert dashboard["uid"] and dashboard["title"] == "Fleet"
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)  # Grafana needs unique ids
    for p in panels:
        if p["type"] != "row":
            assert p["targets"] and all(t["expr"] for t in p["targets"]), p["title"]
    names = {r["alert"] for r in yaml.safe_load(ALERTS.read_text("utf-8"))["groups"][0]["rules"]}
    # The alerts docs/operations.md promises.
    assert {
        "FleetOldestPendingTaskOld",
        "FleetDeadLettersGrowing",
        "FleetWorkerDown",
        "FleetWorkerLagging",
        "FleetRunStuck",
        "FleetRunMonitorFiring",
    } <= names
    assert "fleet_queue_oldest_pending_age_seconds" in used_metrics()


def test_the_monitor_rule_alerts_on_any_run_monitor_firing() -> None:
    """docs/monitors.md: a run monitor firing on any of the newest runs alerts, one alert
    per monitor (its label), saying how many runs."""
    rules = yaml.safe_load(ALERTS.read_text("utf-8"))["groups"][0]["rules"]
    rule = next(r for r in rules if r["alert"] == "FleetRunMonitorFiring")
    assert rule["expr"].strip() == "fleet_monitors_firing > 0"
    summary = rule["annotations"]["summary"]
    assert "{{ $labels.monitor }}" in summary and "{{ $value }}" in summary
    assert rule["labels"]["severity"] == "warning"


def test_the_spend_row_reads_each_types_meters() -> None:
    """The Spend row (docs/costs.md): spend and bytes received by type, requests by proxy
    tier, all from ``fleet_meter`` (a meter name per label value)."""
    panels = json.loads(DASHBOARD.read_text("utf-8"))["panels"]
    rows = [i for i, p in enumerate(panels) if p["type"] == "row"]
    start = next(i for i in rows if panels[i]["title"] == "Spend")
    end = next((i for i in rows if i > start), len(panels))
    spend = panels[start + 1 : end]
    assert [p["title"] for p in spend] == [
        "Spend per hour by type",
        "Bytes received by type",
        "Requests by proxy tier",
    ]
    exprs = [t["expr"] for p in spend for t in p["targets"]]
    assert all("fleet_meter{" in e and 'type=~"$type"' in e for e in exprs), exprs
    assert 'meter="spend"' in exprs[0] and "increase(" in exprs[0]
    assert 'meter="bytes_received"' in exprs[1] and "sum by (type)" in exprs[1]
    # Prometheus anchors a label regex: it takes requests:<tier>, not the total.
    matcher = re.search(r'meter=~"([^"]+)"', exprs[2])
    assert matcher is not None and "sum by (tier)" in exprs[2]
    tiers = re.compile(matcher.group(1))
    assert tiers.fullmatch("requests:residential") and tiers.fullmatch("requests:default")
    assert not tiers.fullmatch("requests") and not tiers.fullmatch("bytes:residential")
    # Below the rest, side by side on one band.
    assert {p["gridPos"]["y"] for p in spend} == {panels[start]["gridPos"]["y"] + 1}
    assert sum(p["gridPos"]["w"] for p in spend) == 24
    assert panels[start]["gridPos"]["y"] >= max(
        p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels[:start]
    )


def _scraped(text: str) -> set[str]:
    """Names of the samples a scrape holds (a family without samples does not count)."""
    return {s.name for family in text_string_to_metric_families(text) for s in family.samples}


async def test_every_metric_used_exists_on_a_real_master(
    live_factory: Any, backend_for_e2e: str, worker: subprocess.Popen[str]
) -> None:
    live = live_factory(backend_for_e2e, sweeper=False)
    base = f"/api/v1/automations/{E2E}"
    wanted = used_metrics()
    async with httpx.AsyncClient(base_url=live.url, headers=auth(ADMIN), timeout=30) as c:

        async def worker_up() -> bool:
            assert worker.poll() is None, "worker exited"
            r = await c.get(f"{base}/workers")
            return r.status_code == 200 and any(v["up"] for v in r.json())

        await eventually(worker_up, "the worker to be up")
        # One that completes and one that dies first (the worker may have one slot),
        # then one that runs on, in a group and a run, while the metrics are read.
        ok_id = (await c.post(f"{base}/tasks", json={"payload": {"n": 7}})).json()["task_id"]
        bad = {"payload": {"n": -1}, "max_attempts": 1}
        bad_id = (await c.post(f"{base}/tasks", json=bad)).json()["task_id"]

        async def finished() -> bool:
            ok = (await c.get(f"{base}/tasks/{ok_id}")).json()["state"]
            dead = (await c.get(f"{base}/tasks/{bad_id}")).json()["state"]
            return (ok, dead) == ("done", "dead")

        await eventually(finished, "the first tasks to finish")
        # A run whose monitor fires as soon as it runs: the sweeper (off here) keeps its
        # state when the test ticks it, as the sweeping master would.
        new_run = {"name": "grafana", "monitors": {"no_output_for_seconds": 0.001}}
        run_id = (await c.post("/api/v1/runs", json=new_run)).json()["run_id"]
        slow = {"payload": {"n": SLOW}, "group": "shop", "run": run_id}
        slow_id = (await c.post(f"{base}/tasks", json=slow)).json()["task_id"]
        missing: set[str] = set()

        async def all_there() -> bool:
            nonlocal missing
            await monitors.tick(backend)
            r = await c.get("/metrics")
            assert r.status_code == 200
            missing = wanted - _scraped(r.text)
            return not missing

        backend = await open_backend(backend_for_e2e)
        try:
            await eventually(all_there, "every metric the dashboard and alerts use")
        except AssertionError:
            raise AssertionError(f"not on /metrics: {sorted(missing)}") from None
        finally:
            await backend.close()
        # The two gauges added for the alerts say what they mean.
        samples = {
            s.name: s
            for f in text_string_to_metric_families((await c.get("/metrics")).text)
            for s in f.samples
            if s.name
            in (
                "fleet_worker_heartbeat_age_seconds",
                "fleet_run_age_seconds",
                "fleet_monitors_firing",
            )
        }
        heartbeat = samples["fleet_worker_heartbeat_age_seconds"]
        assert heartbeat.labels == {"type": E2E, "worker": "w-e2e"}
        assert 0 <= heartbeat.value < 5  # the worker beats every 0.3 s
        age = samples["fleet_run_age_seconds"]
        assert age.labels == {"run": run_id, "name": "grafana"} and 0 <= age.value < 60
        firing = samples["fleet_monitors_firing"]
        assert firing.labels == {"monitor": "no_output_for_seconds"} and firing.value == 1
        # The worker's meters reached the backend and the type's scope is exported.
        attempts = [
            s.value
            for f in text_string_to_metric_families((await c.get("/metrics")).text)
            for s in f.samples
            if s.name == "fleet_meter" and s.labels == {"type": E2E, "meter": "attempts"}
        ]
        assert len(attempts) == 1 and attempts[0] >= 1, attempts
        # Stop the slow task, so the worker stops cleanly.
        assert (await c.delete(f"{base}/tasks/{slow_id}")).status_code == 200
