"""A task's record through a real master and a real ``fleet worker`` process, on
SQLite and Redis (issue 26, 2 and 3): ``GET .../tasks/{id}?wait=`` answers when
the task ends (with its outputs and progress) or when the time is up;
``fleet submit --wait`` prints the outputs and exits as the task ended;
``fleet submit --from-jsonl --wait`` waits for every task. The same route on the
memory backend runs in process (``test_task_wait``)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.client.http import FleetClient
from tests.master.records_plugin import RECORDS
from tests.support.fleet_procs import wait_up, worker_processes
from tests.support.master_proc import MASTER_TOKEN, MasterProcess
from tests.worker.procs import ROOT, fleet_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

PLUGIN = "tests.master.records_plugin"
TASKS = f"/api/v1/automations/{RECORDS}/tasks"


def fleet_cli(master: MasterProcess, *args: str) -> subprocess.CompletedProcess[str]:
    """``fleet <args>`` against the master, as a user runs it."""
    env = fleet_env(FLEET_MASTER_URL=master.url, FLEET_ADMIN_TOKEN=MASTER_TOKEN)
    return subprocess.run(
        [sys.executable, "-m", "fleet", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )


async def _route_checks(http: httpx.AsyncClient) -> None:
    # Out of range: 422.
    for bad in ("0", "-1", "61", "soon"):
        r = await http.get(f"{TASKS}/whatever?wait={bad}")
        assert r.status_code == 422, (bad, r.text)
    # A task that ends within the wait: answered when it ends, outputs and all.
    r = await http.post(TASKS, json={"payload": {"rows": 3}})
    assert r.status_code == 202, r.text
    task_id = r.json()["task_id"]
    r = await http.get(f"{TASKS}/{task_id}?wait=30")
    assert r.status_code == 200, r.text
    record = r.json()
    assert record["state"] == "done" and record["attempt"] == 1, record
    assert [o["payload"] for o in record["outputs"]] == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert all(o["attempt"] == 1 and o["id"] for o in record["outputs"])
    assert record["progress"]["fraction"] == 1.0 and record["progress"]["message"] == "row 3/3"
    assert record["submitted_at"] <= record["started_at"] <= record["finished_at"]
    # A task still running when the wait is over: 200 with where it is now.
    r = await http.post(TASKS, json={"payload": {"rows": 1, "sleep": 5}})
    slow_id = r.json()["task_id"]
    started = time.monotonic()
    r = await http.get(f"{TASKS}/{slow_id}?wait=1")
    took = time.monotonic() - started
    assert r.status_code == 200, r.text
    assert r.json()["state"] in ("queued", "processing"), r.json()
    assert 0.9 <= took < 4, took


def _cli_checks(master: MasterProcess, tmp_path: Path) -> None:
    with FleetClient(master.url, MASTER_TOKEN) as client:
        record = client.submit(RECORDS, {"rows": 2}, wait=30)
        assert record["state"] == "done", record
        assert [o["payload"] for o in record["outputs"]] == [{"i": 0}, {"i": 1}]
        running = client.submit(RECORDS, {"sleep": 5}, wait=0.5)
        assert running["state"] in ("queued", "processing"), running
    done = fleet_cli(master, "submit", RECORDS, '{"rows": 2}', "--wait")
    assert done.returncode == 0, done.stderr
    assert [json.loads(line) for line in done.stdout.splitlines()] == [{"i": 0}, {"i": 1}]
    assert " done (attempt 1)" in done.stderr
    dead = fleet_cli(
        master, "submit", RECORDS, '{"rows": 1, "fail": true}', "--max-attempts", "1", "--wait"
    )
    assert dead.returncode == 1, (dead.stdout, dead.stderr)
    assert " dead " in dead.stderr and "told to fail" in dead.stderr
    slow = fleet_cli(master, "submit", RECORDS, '{"sleep": 5}', "--wait", "--wait-timeout", "1")
    assert slow.returncode == 2, (slow.stdout, slow.stderr)
    jsonl = tmp_path / "jobs.jsonl"
    jsonl.write_text("".join(json.dumps({"rows": 1}) + "\n" for _ in range(5)))
    many = fleet_cli(master, "submit", RECORDS, "--from-jsonl", str(jsonl), "--wait")
    assert many.returncode == 0, many.stderr
    assert [json.loads(line) for line in many.stdout.splitlines()] == [{"i": 0}] * 5
    assert "5 done; 0 refused" in many.stderr
    # fleet task shows the record.
    record = json.loads(
        fleet_cli(master, "submit", RECORDS, '{"rows": 2}', "--wait", "--json").stdout
    )
    shown = fleet_cli(master, "task", RECORDS, record["task_id"])
    assert shown.returncode == 0, shown.stderr
    assert "row 2/2" in shown.stdout and "done" in shown.stdout


async def test_wait_and_submit_wait_through_a_real_worker(shared_url: str, tmp_path: Path) -> None:
    url = shared_url
    env = fleet_env(FLEET_ENTRY_POINTS="0")
    master = MasterProcess(url, tmp_path)
    b: Backend
    try:
        async with await open_backend(url) as b, master.client() as http:
            http.timeout = httpx.Timeout(90)
            await b.configs.set(RECORDS, {"slots": 4})
            with worker_processes(url, PLUGIN, RECORDS, ["w1"], tmp_path, env):
                await wait_up(b, RECORDS, ["w1"], http)
                await _route_checks(http)
                _cli_checks(master, tmp_path)
    finally:
        master.close()
