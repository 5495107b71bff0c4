"""Webhooks by a real fleet (``fleet master`` and ``fleet worker`` processes, Redis and
SQLite), to a local receiver:

* answering 500, 500, then 200, the receiver gets ``run.completed`` of each run after
  three attempts carrying the same ``webhook-id``, body and a signature that verifies,
  and accepts exactly one per run; a run that ends while no master runs is delivered by
  the next master's catch-up scan, and that scan queues nothing again for the others;
  the delivery log says so over REST;
* a delivery worker killed -9 while the receiver holds its request open does not lose
  the delivery: another worker makes it later, with the same ``webhook-id``;
* a task the worker process dead-letters is delivered as ``task.dead``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core.records import PushRequest, TaskBody
from fleet.webhooks.signing import verify
from tests.support.master_proc import MasterProcess
from tests.support.waits import until
from tests.webhooks.receiver import Receiver, Seen
from tests.worker.procs import WorkerProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(150)]

TYPE = "hook-pages"
PLUGIN = "tests.webhooks.plugin"


def check(seen: Seen, secret: str) -> dict[str, Any]:
    """The request's signature verifies; its body, read."""
    h = seen.headers
    assert h["content-type"] == "application/json" and h["user-agent"].startswith("Fleet-")
    assert h["webhook-id"].startswith("evt_") and seen.path == "/hooks/in"
    ts = int(h["webhook-timestamp"])
    assert verify(secret, h["webhook-id"], ts, seen.body, h["webhook-signature"])
    assert not verify(secret, h["webhook-id"], ts + 1, seen.body, h["webhook-signature"])
    return dict(json.loads(seen.body))


async def subscribe(http: httpx.AsyncClient, url: str) -> tuple[str, str]:
    body = {"url": url, "events": ["run.completed"], "types": [TYPE]}
    r = await http.post("/api/v1/webhooks", json=body)
    assert r.status_code == 201, r.text
    return str(r.json()["id"]), str(r.json()["secret"])


async def run_of(b: Backend, tasks: int) -> str:
    """A run of ``tasks`` tasks of the type, pushed straight into the backend."""
    run = await b.runs.create(types=(TYPE,))
    requests = [
        PushRequest(TaskBody(id=f"{run}-{n}", payload={"n": n}, run=run)) for n in range(tasks)
    ]
    await b.queues.push(TYPE, requests)
    return run


async def test_retried_until_accepted_once_per_run(shared_url: str, tmp_path: Path) -> None:
    master = MasterProcess(shared_url, tmp_path)
    worker = WorkerProcess(shared_url, PLUGIN, TYPE, "pages", tmp_path)
    later: MasterProcess | None = None
    with Receiver(lambda before: 500 if before < 2 else 200) as receiver:
        try:
            await master.wait_ready()
            async with master.client() as http, await open_backend(shared_url) as b:
                hook_id, secret = await subscribe(http, receiver.url)
                runs = [await run_of(b, 3), await run_of(b, 2)]

                async def accepted(n: int) -> list[Seen] | None:
                    found = receiver.accepted()
                    return found if len(found) >= n else None

                await until(lambda: accepted(2), timeout=60, what="both runs delivered")
                # a run that ends while no master runs
                assert master.interrupt() == 0
                quiet = await run_of(b, 1)
                await until(lambda: _ended(b, quiet), timeout=30, what="the run ended")
                (tmp_path / "later").mkdir()
                later = MasterProcess(shared_url, tmp_path / "later")
                await later.wait_ready()
                found = await until(lambda: accepted(3), timeout=60, what="the catch-up")
                assert found is not None
                runs.append(quiet)
                by_run = {}
                for seen in found:
                    doc = check(seen, secret)
                    assert doc["type"] == "run.completed" and doc["timestamp"].endswith("Z")
                    by_run[doc["data"]["run_id"]] = seen
                assert sorted(by_run) == sorted(runs)
                for run, seen in by_run.items():
                    tries = receiver.of(seen.headers["webhook-id"])
                    assert [t.status for t in tries] == [500, 500, 200], run
                    assert {t.body for t in tries} == {seen.body}
                    for t in tries:
                        check(t, secret)
                    data = json.loads(seen.body)["data"]
                    assert data["state"] == "done" and data["types"] == [TYPE]
                # the new master's scan saw the first runs again: nothing new was queued
                assert len(receiver.seen) == 9
                async with later.client() as again:
                    page = (await again.get(f"/api/v1/webhooks/{hook_id}/deliveries")).json()
                shown = {d["event_id"]: d for d in page["deliveries"]}
                assert len(shown) == 3
                for seen in by_run.values():
                    d = shown[seen.headers["webhook-id"]]
                    assert (d["status"], d["attempts"], d["http_status"]) == ("delivered", 3, 200)
                    assert d["event_type"] == "run.completed" and d["error"] is None
        finally:
            worker.close()
            master.close()
            if later is not None:
                later.close()


async def _ended(b: Backend, run: str) -> bool:
    record = await b.runs.get(run)
    return record is not None and record.state == "done"


async def test_a_delivery_outlives_its_killed_worker(shared_url: str, tmp_path: Path) -> None:
    # no in-process delivery worker: the worker processes deliver
    master = MasterProcess(shared_url, tmp_path, env={"FLEET_MASTER_WEBHOOKS": "0"})
    pages = WorkerProcess(shared_url, PLUGIN, TYPE, "pages", tmp_path)
    args = ("fleet.webhooks.automation", "fleet-webhooks")
    first = WorkerProcess(shared_url, *args, "hooks-1", tmp_path)
    second: WorkerProcess | None = None
    with Receiver(lambda before: 0 if before == 0 else 200) as receiver:
        try:
            await master.wait_ready()
            async with master.client() as http, await open_backend(shared_url) as b:
                await until(lambda: b.catalog.get("fleet-webhooks"), timeout=30, what="the type")
                r = await http.patch(
                    "/api/v1/automations/fleet-webhooks/config", json={"visibility_seconds": 10}
                )
                assert r.status_code == 200, r.text
                hook_id, secret = await subscribe(http, receiver.url)
                run = await run_of(b, 1)
                held = await until(
                    lambda: _held(receiver), timeout=60, what="the first attempt, held open"
                )
                first.kill9()
                receiver.release.set()
                second = WorkerProcess(shared_url, *args, "hooks-2", tmp_path)

                async def delivered() -> list[Seen] | None:
                    return receiver.accepted() or None

                found = await until(delivered, timeout=90, what="the delivery, by another worker")
                assert found is not None and held is not None
                (done,) = found
                assert done.headers["webhook-id"] == held.headers["webhook-id"]
                assert done.body == held.body
                doc = check(done, secret)
                check(held, secret)
                assert doc["data"]["run_id"] == run
                log = (await http.get(f"/api/v1/webhooks/{hook_id}/deliveries")).json()
                (entry,) = log["deliveries"]
                assert entry["status"] == "delivered"
                # the killed attempt counts unless its start mark had not landed (refunded)
                assert entry["attempts"] in (1, 2)
        finally:
            for proc in (first, second, pages):
                if proc is not None:
                    proc.close()
            master.close()


async def _held(receiver: Receiver) -> Seen | None:
    return receiver.seen[0] if receiver.held.is_set() else None


async def test_a_dead_task_is_delivered(shared_url: str, tmp_path: Path) -> None:
    master = MasterProcess(shared_url, tmp_path)
    worker = WorkerProcess(shared_url, PLUGIN, TYPE, "pages", tmp_path)
    with Receiver(lambda before: 200) as receiver:
        try:
            await master.wait_ready()
            async with master.client() as http, await open_backend(shared_url) as b:
                body = {"url": receiver.url, "events": ["task.dead"], "types": [TYPE]}
                r = await http.post("/api/v1/webhooks", json=body)
                assert r.status_code == 201, r.text
                secret = r.json()["secret"]
                await until(lambda: _listening(http), timeout=30, what="the master listening")
                task = TaskBody(id="broken-1", payload={"n": -1}, max_attempts=1)
                await b.queues.push(TYPE, [PushRequest(task)])

                async def delivered() -> list[Seen] | None:
                    return receiver.accepted() or None

                found = await until(delivered, timeout=60, what="task.dead delivered")
                assert found is not None
                (seen,) = found
                doc = check(seen, secret)
                assert doc["type"] == "task.dead"
                assert doc["data"]["type"] == TYPE and doc["data"]["task_id"] == "broken-1"
                assert "page -1 is broken" in doc["data"]["error"] and doc["data"]["attempt"] == 1
        finally:
            worker.close()
            master.close()


async def _listening(http: httpx.AsyncClient) -> bool:
    # the master's delivery worker registered: its webhook loop runs, so it listens too
    workers = (await http.get("/api/v1/workers")).json()
    return any(w["type"] == "fleet-webhooks" for w in workers)
