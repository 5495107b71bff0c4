"""docs/webhooks.md as written, against a real fleet (``fleet master`` and a ``fleet
worker`` process, SQLite): its ``fleet webhooks create`` line subscribes the page's
receiver, run as its own process from the page's Python block; a run that completes is
verified and printed by it (its signature checked as the page does it), a forged request
gets a 401; the JSON block has the shape of the body that came."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from click.testing import CliRunner

from fleet.backends import open_backend
from fleet.cli import main
from fleet.core.records import PushRequest, TaskBody
from fleet.webhooks.events import run_event
from tests.docs.blocks import fenced_blocks
from tests.support.master_proc import MASTER_TOKEN, MasterProcess
from tests.support.redis_server import free_port
from tests.support.waits import until
from tests.worker.procs import WorkerProcess

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "webhooks.md").read_text(encoding="utf-8")
TYPE = "hook-pages"


def blocks(lang: str) -> list[str]:
    return [b.text for b in fenced_blocks(PAGE) if b.lang == lang]


def keys(value: Any) -> Any:
    """The shape of a JSON value: its keys, nested (values left out)."""
    if isinstance(value, dict):
        return {k: keys(v) for k, v in value.items()}
    return type(value).__name__ if value is not None else None


def start_receiver(where: Path, code: str, secret: str, port: int) -> subprocess.Popen[str]:
    """The page's receiver, as the page says to run it, printing to a pipe."""
    (where / "receiver.py").write_text(code)
    env = {**os.environ, "WEBHOOK_SECRET": secret, "PORT": str(port)}
    args = [sys.executable, "receiver.py"]
    return subprocess.Popen(args, cwd=where, env=env, stdout=subprocess.PIPE, text=True)


async def test_the_page_runs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    (bash,) = blocks("bash")
    (receiver_code,) = blocks("python")
    (example,) = blocks("json")
    port = free_port()
    master = MasterProcess(url, tmp_path)
    worker = WorkerProcess(url, "tests.webhooks.plugin", TYPE, "pages", tmp_path)
    receiver: subprocess.Popen[str] | None = None
    try:
        await master.wait_ready()
        (line,) = [x for x in bash.splitlines() if x.startswith("fleet webhooks create")]
        line = line.replace("http://127.0.0.1:9000/hooks", f"http://127.0.0.1:{port}/hooks")
        line = line.replace("cf-scraper", TYPE)
        args = shlex.split(line)[1:]
        r = CliRunner().invoke(main, [*args, "--url", master.url, "--token", MASTER_TOKEN])
        assert r.exit_code == 0, r.output
        secret = next(x.split()[1] for x in r.output.splitlines() if x.startswith("secret"))
        receiver = start_receiver(tmp_path, receiver_code, secret, port)
        async with httpx.AsyncClient() as http:

            async def up() -> bool:
                forged = {
                    "webhook-id": "evt_x",
                    "webhook-timestamp": "1",
                    "webhook-signature": "v1,AAAA",
                }
                got = await http.post(
                    f"http://127.0.0.1:{port}/hooks", content=b"{}", headers=forged
                )
                return got.status_code == 401

            await until(
                up,
                timeout=15,
                what="the receiver, refusing a forged request",
                ignoring=(httpx.HTTPError,),
            )
        async with await open_backend(url) as b:
            run = await b.runs.create(name="site", types=(TYPE,))
            await b.queues.push(
                TYPE, [PushRequest(TaskBody(id=f"{run}-1", payload={"n": 1}, run=run))]
            )
        assert receiver.stdout is not None
        printed = (await asyncio.to_thread(receiver.stdout.readline)).split()  # its first
        assert printed[0].startswith("evt_") and printed[1] == "run.completed"
        async with master.client() as http:
            (hook,) = (await http.get("/api/v1/webhooks")).json()["webhooks"]
            log = (await http.get(f"/api/v1/webhooks/{hook['id']}/deliveries")).json()
        (entry,) = log["deliveries"]
        assert (entry["event_id"], entry["status"], entry["http_status"]) == (
            printed[0],
            "delivered",
            204,
        )
        documented = json.loads(example)
        assert documented["type"] == "run.completed"
        async with await open_backend(url) as b:
            record = await b.runs.get(run)
        assert record is not None
        event = run_event(record.to_dict())
        assert event is not None and event.id == printed[0]
        body = json.loads(event.body())
        assert keys(body) == keys(documented)
    finally:
        if receiver is not None:
            receiver.kill()
            receiver.wait(10)
            if receiver.stdout is not None:
                receiver.stdout.close()
        worker.close()
        master.close()
