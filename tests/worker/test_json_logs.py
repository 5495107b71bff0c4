"""Structured logs (issue 26, 6): with ``FLEET_LOG_FORMAT=json`` a real worker, a real
master and ``fleet dev`` write one JSON object per line — every line parses — and the
lines about a task name its type, id, attempt and worker; text stays the default."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleet.backends import open_backend
from tests.dev.test_dev_command import hermetic_env, wait_for
from tests.support.master_proc import MasterProcess
from tests.support.redis_server import free_port
from tests.worker.procs import WorkerProcess
from tests.worker.support import push, wait_until

pytestmark = pytest.mark.slow

ECHO = "wt-echo"
JSON = {"FLEET_LOG_FORMAT": "json", "FLEET_LOG_LEVEL": "INFO"}


def _doc_samples() -> list[dict[str, Any]]:
    page = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    section = page.split("## Structured logs", 1)[1].split("\n## ", 1)[0]
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", section, re.S)]


#: The log line docs/operations.md shows, parsed as a user would read it.
DOC_SAMPLE = _doc_samples()


def parse_all(text: str) -> list[dict[str, Any]]:
    """Every line as a JSON object (an assertion names the first that is not one)."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        record = json.loads(line)  # raises on a line that is not JSON
        assert isinstance(record, dict), line
        assert {"time", "level", "logger", "message"} <= record.keys(), line
        out.append(record)
    return out


async def test_worker_and_master_write_json_lines(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    master = MasterProcess(url, tmp_path, env=JSON)
    worker = WorkerProcess(
        url, "tests.plugins_fixture.echo", ECHO, "jw", tmp_path, grace=3, env=JSON
    )
    try:
        async with await open_backend(url) as b:
            ok, flaky = await push(b, ECHO, {"n": 1}, {"n": 2, "fail_times": 1}, max_attempts=3)

            async def done() -> bool:
                states = [(await b.queues.state(ECHO, t)).state for t in (ok, flaky)]
                return states == ["done", "done"]

            await wait_until(done, timeout=60, what="both tasks done")
        await master.wait_ready()
    finally:
        worker.signal(signal.SIGTERM)
        worker.proc.wait(30)
        worker.close()
        master.interrupt()
        master.close()
    lines = parse_all(worker.log_path.read_text())
    retry = [r for r in lines if r.get("task_id") == flaky and "attempt 1" in r["message"]]
    assert retry, [r["message"] for r in lines]
    assert retry[0]["type"] == ECHO and retry[0]["attempt"] == 1 and retry[0]["worker_id"] == "jw"
    assert any(r.get("worker_id") == "jw" and "task_id" not in r for r in lines)  # start-up
    # The line docs/operations.md shows is such a line: the same fields, the same words.
    (shown,) = DOC_SAMPLE
    assert shown.keys() == retry[0].keys()
    assert shown["logger"].split(".")[1:2] == retry[0]["logger"].split(".")[1:2] == ["slot"]
    assert shown["message"].split(" ")[2:5] == retry[0]["message"].split(" ")[2:5]
    master_lines = parse_all(master.log())
    assert any("fleet master on" in r["message"] for r in master_lines)
    assert any(r["logger"].startswith("uvicorn") for r in master_lines)


@pytest.mark.timeout(120)
def test_fleet_dev_writes_json_lines(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "dev.log"
    env = {**hermetic_env(), **JSON}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "fleet", "dev", "--plugin", "tests.plugins_fixture.echo",
             "--port", str(port), "--grace", "3"],
            cwd=tmp_path, env={**env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
                wait_for("the master", lambda: client.get("/readyz").status_code == 200, 60, proc)
            wait_for("a worker line", lambda: '"component": "worker"' in log.read_text(), 30, proc)
            wait_for("the banner", lambda: "Fleet is running" in log.read_text(), 30, proc)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(30)
    lines = parse_all(log.read_text())
    assert {r["component"] for r in lines} >= {"dev", "master", "worker"}
    assert any("Fleet is running" in r["message"] for r in lines)
