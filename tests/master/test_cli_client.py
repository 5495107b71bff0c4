"""The CLI client commands against a live master (real HTTP), and `fleet master` itself."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from fleet.cli import main
from fleet.client.tokenfile import ensure_token, is_loopback, read_token, token_path
from tests.master.conftest import ADMIN, READ
from tests.master.plugins import SCRAPE
from tests.support.redis_server import free_port
from tests.support.waits import until_sync


@pytest.fixture
def live(live_factory: Any, sqlite_url: str) -> Any:
    return live_factory(sqlite_url, sweeper=False)


def fleet(live: Any, *args: str, token: str = ADMIN) -> Any:
    runner = CliRunner()
    argv = [args[0], *args[1:], "--url", live.url, "--token", token]
    return runner.invoke(main, argv, catch_exceptions=False)


def test_submit_tasks_dlq_config_workers_catalog(live: Any, tmp_path: Path) -> None:
    r = fleet(live, "submit", SCRAPE, '{"url": "https://a"}', "--priority", "2", "--json")
    assert r.exit_code == 0, r.output
    task_id = json.loads(r.output)["task_id"]
    r = fleet(live, "task", SCRAPE, task_id, "--json")
    assert json.loads(r.output)["state"] == "queued"
    r = fleet(live, "tasks", SCRAPE)
    assert r.exit_code == 0 and "high" in r.output
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text('{"url": "1"}\n{"url": "2"}\n{"depth": 3}\n')
    r = fleet(live, "submit", SCRAPE, "--from-jsonl", str(jsonl))
    assert r.exit_code == 1
    assert "2 queued, 0 duplicates, 1 refused" in r.output
    assert "line 3: payload.url: Field required" in r.output
    r = fleet(live, "task", SCRAPE, task_id, "--cancel")
    assert r.exit_code == 0 and "cancelled" in r.output
    r = fleet(live, "dlq", SCRAPE, "--json")
    assert json.loads(r.output) == []
    r = fleet(live, "config", "set", SCRAPE, "slots=4", "user_agent=bot")
    assert r.exit_code == 0 and "generation" in r.output
    r = fleet(live, "config", "get", SCRAPE, "--json")
    assert json.loads(r.output)["config"] == {"slots": 4, "user_agent": "bot"}
    r = fleet(live, "workers")
    assert r.exit_code == 0
    r = fleet(live, "catalog")
    assert r.exit_code == 0 and SCRAPE in r.output
    r = fleet(live, "catalog", SCRAPE)
    assert json.loads(r.output)["kind"] == "BatchAutomation"


def test_clean_errors_for_422_401_403_and_connection_refused(live: Any) -> None:
    r = fleet(live, "submit", SCRAPE, '{"depth": 9}')
    assert r.exit_code == 1
    assert "invalid input (422)" in r.output and "payload.url: Field required" in r.output
    assert "Traceback" not in r.output
    r = fleet(live, "catalog", token="wrong")
    assert r.exit_code == 1 and "refused the token (401)" in r.output
    r = fleet(live, "config", "set", SCRAPE, "slots=2", token=READ)
    assert r.exit_code == 1 and "(403)" in r.output
    r = CliRunner().invoke(main, ["catalog", "--url", f"http://127.0.0.1:{free_port()}"])
    assert r.exit_code == 1 and "cannot reach the master" in r.output
    r = fleet(live, "submit", SCRAPE, "{not json")
    assert r.exit_code == 2 and "not valid JSON" in r.output


def test_doctor_reports_backend_master_and_token(live: Any, sqlite_url: str) -> None:
    r = fleet(live, "doctor", "--backend", sqlite_url, "--json")
    checks = {c["name"]: c["status"] for c in json.loads(r.output)}
    assert checks["backend"] == "ok" and checks["master"] == "ok" and checks["token"] == "ok"
    r = fleet(live, "doctor", "--backend", sqlite_url, "--json", token="nope")
    assert r.exit_code == 1
    assert {c["name"]: c["status"] for c in json.loads(r.output)}["token"] == "fail"


def test_doctor_warns_about_redis_without_aof(redis_url: str) -> None:
    r = CliRunner().invoke(main, ["doctor", "--backend", redis_url, "--no-master", "--json"])
    checks = {c["name"]: c for c in json.loads(r.output)}
    assert checks["backend"]["status"] == "ok"
    assert checks["redis persistence"]["status"] == "warn"


def test_token_file_is_private_and_reused(tmp_path: Path) -> None:
    path = token_path({"XDG_STATE_HOME": str(tmp_path)})
    assert path == tmp_path / "fleet" / "admin-token"
    token, written = ensure_token(path)
    assert stat.S_IMODE(os.stat(written).st_mode) == 0o600
    assert ensure_token(path)[0] == token == read_token(path)
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.com")


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEET_")}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    env["FLEET_ENTRY_POINTS"] = "0"
    env["FLEET_BACKEND_URL"] = f"sqlite:///{tmp_path / 'f.db'}"
    return env


def test_fleet_master_refuses_public_bind_without_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in _env(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("FLEET_ADMIN_TOKEN", raising=False)
    r = CliRunner().invoke(main, ["master", "--host", "0.0.0.0", "--port", str(free_port())])
    assert r.exit_code == 2
    assert "FLEET_ADMIN_TOKEN" in r.output
    assert not (tmp_path / "state").exists()


def test_fleet_master_on_loopback_generates_a_token_file(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "fleet", "master", "--port", str(port)],
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"

        def ready() -> bool:
            assert proc.poll() is None, "master did not start"
            return httpx.get(f"{url}/readyz", timeout=1).status_code == 200

        until_sync(
            ready, timeout=30, interval=0.1, what="the master to start", ignoring=(httpx.HTTPError,)
        )
        path = tmp_path / "state" / "fleet" / "admin-token"
        token = path.read_text().strip()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        r = httpx.get(f"{url}/api/v1/catalog", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=15)
    assert str(path) in output
    assert token not in output


async def _seed(url: str) -> None:
    from fleet.backends import open_backend
    from fleet.core.records import PushRequest, TaskBody

    b = await open_backend(url)
    try:
        for i in range(3):
            await b.streams.push("m-loop", {"text": f"line{i}"}, worker_id="w")
        body = TaskBody(id="dead-1", payload={"url": "d"}, max_attempts=1, priority=4)
        await b.queues.push(SCRAPE, [PushRequest(body=body)])
        (res,) = await b.queues.reserve(SCRAPE)
        await b.queues.nack(SCRAPE, "dead-1", res.token, delay_seconds=0, error="kaput")
        await b.workers.register(SCRAPE, "w1", {"host": "box"})
        await b.workers.set_state(SCRAPE, "w1", {"state": "IDLE", "last_seen": str(time.time())})
    finally:
        await b.close()


def test_tail_dlq_and_worker_actions(live: Any, sqlite_url: str) -> None:
    import asyncio

    asyncio.run(_seed(sqlite_url))
    r = fleet(live, "tail", "m-loop", "-n", "2")
    assert r.exit_code == 0
    assert [json.loads(line) for line in r.output.splitlines()] == [  # the newest two
        {"text": "line1"},
        {"text": "line2"},
    ]
    r = fleet(live, "dlq", SCRAPE)
    assert r.exit_code == 0 and "dead-1" in r.output and "kaput" in r.output
    r = fleet(live, "dlq", SCRAPE, "--replay-id", "dead-1")
    assert "1 tasks replayed" in r.output
    r = fleet(live, "task", SCRAPE, "dead-1", "--json")
    assert json.loads(r.output)["state"] == "queued"
    r = fleet(live, "dlq", SCRAPE, "--drain", "--yes", "--json")
    assert json.loads(r.output) == {"drained": 0}
    r = fleet(live, "workers", SCRAPE, "--drain", "w1")
    assert r.exit_code == 0 and "w1: drain" in r.output
    r = fleet(live, "workers", "--json")
    (view,) = json.loads(r.output)
    assert view["worker_id"] == "w1" and view["draining_requested"] is True
    r = fleet(live, "config", "set", SCRAPE, "slots=5", "--worker", "w1")
    assert r.exit_code == 0
    r = fleet(live, "config", "get", SCRAPE, "--worker", "w1", "--json")
    assert json.loads(r.output)["merged"]["slots"] == 5
    r = fleet(live, "workers", SCRAPE, "--forget", "w1")
    assert r.exit_code == 0
    assert json.loads(fleet(live, "workers", "--json").output) == []


def test_client_follows_events(live: Any, sqlite_url: str) -> None:
    import asyncio
    import threading

    from fleet.backends import open_backend
    from fleet.client.http import FleetClient

    async def emit() -> None:
        b = await open_backend(sqlite_url)
        try:
            await b.streams.push("m-loop", {"text": "live"}, worker_id="w")
        finally:
            await b.close()

    with FleetClient(live.url, ADMIN) as client:
        events = client.events(["m-loop"])
        name, data = next(events)
        assert name == "hello" and data["types"] == ["m-loop"]
        threading.Thread(target=lambda: asyncio.run(emit())).start()
        for name, data in events:
            if name == "emit":
                assert data["data"]["payload"] == {"text": "live"}
                break
        events.close()


def test_invalid_environment_is_a_clean_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEET_TOKEN_SCOPES", "{not json")
    r = CliRunner().invoke(main, ["catalog"])
    assert r.exit_code == 2
    assert "invalid environment: FLEET_TOKEN_SCOPES" in r.output
    assert "Traceback" not in r.output
