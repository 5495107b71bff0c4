"""A live master and a real `fleet worker` process, on SQLite and Redis.

The master's process never imports the worker's plugin: validation, config
and views come from the catalog entry and state the worker publishes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleet.core.automation import get_automation
from tests.master.conftest import ADMIN, auth
from tests.support.waits import until

E2E = "m-e2e"
ROOT = Path(__file__).resolve().parents[2]


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 30) -> None:
    await until(check, timeout=timeout, interval=0.1, what=what)


@pytest.fixture(params=["sqlite", "redis"])
def backend_for_e2e(request: pytest.FixtureRequest, sqlite_url: str) -> str:
    if request.param == "sqlite":
        return sqlite_url
    url: str = request.getfixturevalue("redis_url")
    return url


@pytest.fixture
def worker(backend_for_e2e: str) -> Iterator[subprocess.Popen[str]]:
    """A `fleet worker` process running the e2e plugin; stopped with SIGTERM."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEET_")}
    env.update(FLEET_HEARTBEAT_SECONDS="0.3", FLEET_RESYNC_SECONDS="1", PYTHONPATH=str(ROOT))
    env["FLEET_ENTRY_POINTS"] = "0"
    argv = [sys.executable, "-m", "fleet", "worker", "--plugin", "tests.master.e2e_plugin"]
    argv += ["--type", E2E, "--id", "w-e2e", "--backend", backend_for_e2e, "--grace", "2"]
    proc = subprocess.Popen(
        argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    yield proc
    proc.send_signal(signal.SIGTERM)
    try:
        _, stderr = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate()
    assert "Traceback" not in stderr, stderr


async def test_master_steers_a_real_worker(
    live_factory: Any, backend_for_e2e: str, worker: subprocess.Popen[str]
) -> None:
    assert get_automation(E2E) is None  # the master side has no plugin for it
    live = live_factory(backend_for_e2e, sweeper=False)
    base = f"/api/v1/automations/{E2E}"
    async with httpx.AsyncClient(base_url=live.url, headers=auth(ADMIN), timeout=30) as c:

        async def worker_up() -> bool:
            assert worker.poll() is None, "worker exited"
            r = await c.get(f"{base}/workers")
            return r.status_code == 200 and any(v["up"] for v in r.json())

        await eventually(worker_up, "the worker to be up")
        # Validated from the worker's catalog entry (JSON schema).
        r = await c.post(f"{base}/tasks", json={"payload": {"n": 5000}})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "payload", "n"]
        r = await c.post(f"{base}/tasks", json={"payload": {"n": 7}})
        ok_id = r.json()["task_id"]
        r = await c.post(f"{base}/tasks", json={"payload": {"n": -1}, "max_attempts": 1})
        bad_id = r.json()["task_id"]

        async def done() -> bool:
            state = (await c.get(f"{base}/tasks/{ok_id}")).json()["state"]
            dead = (await c.get(f"{base}/dead")).json()
            return state == "done" and any(d["id"] == bad_id for d in dead)

        await eventually(done, "the tasks to finish")
        out = (await c.get(f"{base}/output")).json()
        assert [e["payload"] for e in out] == [{"n": 7}]
        dead = (await c.get(f"{base}/dead")).json()
        assert "negative job -1" in dead[0]["last_error"]
        # A config change reaches the worker: applied generation catches up.
        r = await c.patch(f"{base}/config", json={"slots": 2, "label": "x"})
        assert r.status_code == 200 and r.json()["workers"] == ["w-e2e"]
        gen = r.json()["gen"]

        async def applied() -> bool:
            (view,) = (await c.get(f"{base}/workers")).json()
            return view["gen"]["applied"] == gen and not view["lagging"]

        await eventually(applied, "the worker to apply the new generation")
        r = await c.patch(f"{base}/config", json={"labl": "typo"})
        assert r.status_code == 422
        # Cancel a running task: the master publishes cancel.<type>, the slot stops it.
        slow_id = (await c.post(f"{base}/tasks", json={"payload": {"n": 999}})).json()["task_id"]

        async def state_is(task_id: str, wanted: str) -> bool:
            return (await c.get(f"{base}/tasks/{task_id}")).json()["state"] == wanted

        await eventually(lambda: state_is(slow_id, "processing"), "the slow task to start")
        r = await c.delete(f"{base}/tasks/{slow_id}")
        assert r.json() == {"task_id": slow_id, "outcome": "cancelling"}
        await eventually(lambda: state_is(slow_id, "cancelled"), "the slow task to be cancelled")
        # Drain and resume reach the worker.
        assert (await c.post(f"{base}/workers/w-e2e/drain")).status_code == 200

        async def worker_state(*wanted: str) -> bool:
            (view,) = (await c.get(f"{base}/workers")).json()
            return bool(view["state"] in wanted)

        await eventually(lambda: worker_state("DRAINING"), "the worker to drain")
        assert (await c.post(f"{base}/workers/w-e2e/resume")).status_code == 200
        await eventually(lambda: worker_state("RUNNING", "IDLE"), "the worker to resume")
        metrics = (await c.get("/metrics")).text
        assert f'fleet_tasks_completed_total{{type="{E2E}"}} 1.0' in metrics
        assert f'fleet_tasks_dead_total{{type="{E2E}"}} 1.0' in metrics
