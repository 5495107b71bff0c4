"""Runs over REST: create, submit into, read with ?wait, list, cancel, unique_key."""

from __future__ import annotations

import asyncio

from fleet.core.runs import callback_task_id
from tests.master.conftest import ADMIN, InProcess, auth
from tests.master.plugins import SCRAPE

H = auth(ADMIN)
TASKS = f"/api/v1/automations/{SCRAPE}/tasks"


async def _run(master: InProcess, **body: object) -> str:
    r = await master.client.post("/api/v1/runs", json=body, headers=H)
    assert r.status_code == 201, r.text
    return str(r.json()["run_id"])


async def test_a_run_counts_its_tasks_and_ends_with_its_callback(master: InProcess) -> None:
    run = await _run(master, name="crawl", on_complete={"type": SCRAPE, "payload": {"url": "cb"}})
    r = await master.client.post(
        TASKS, json={"payload": {"url": "a"}, "run": run, "unique_key": "a"}, headers=H
    )
    assert r.status_code == 202 and r.json()["queued"] is True
    r = await master.client.post(
        TASKS, json={"payload": {"url": "a"}, "run": run, "unique_key": "a"}, headers=H
    )
    assert r.json() == {**r.json(), "queued": False, "duplicate": True}
    r = await master.client.get(f"/api/v1/runs/{run}", headers=H)
    got = r.json()
    assert got["state"] == "running" and got["name"] == "crawl"
    assert got["counters"]["submitted"] == 1 and got["counters"]["duplicates"] == 1
    assert got["by_type"][SCRAPE]["pending"] == 1

    async def finish() -> None:
        await asyncio.sleep(0.2)
        res = (await master.backend.queues.reserve(SCRAPE, k=1))[0]
        await master.backend.queues.ack(SCRAPE, [(res.body.id, res.token)])

    finisher = asyncio.create_task(finish())
    r = await master.client.get(f"/api/v1/runs/{run}?wait=5", headers=H)
    await finisher
    assert r.json()["state"] == "done" and r.json()["counters"]["done"] == 1
    cb = await master.backend.queues.reserve(SCRAPE, k=5)
    assert [c.body.id for c in cb] == [callback_task_id(run)]
    assert cb[0].body.payload["run"]["counters"]["done"] == 1
    r = await master.client.post(TASKS, json={"payload": {"url": "b"}, "run": run}, headers=H)
    assert r.status_code == 409 and "ended" in r.json()["detail"]


async def test_unknown_run_bad_bodies_and_batch(master: InProcess) -> None:
    r = await master.client.post(TASKS, json={"payload": {"url": "a"}, "run": "nope"}, headers=H)
    assert r.status_code == 422 and "run id" in r.text
    ghost = "0" * 32
    r = await master.client.post(TASKS, json={"payload": {"url": "a"}, "run": ghost}, headers=H)
    assert r.status_code == 404 and ghost in r.json()["detail"]
    r = await master.client.post(
        TASKS, json={"payload": {"url": "a"}, "unique_key": "k"}, headers=H
    )
    assert r.status_code == 422
    r = await master.client.post("/api/v1/runs", json={"on_complete": {"x": 1}}, headers=H)
    assert r.status_code == 422
    assert (await master.client.get("/api/v1/runs/nope", headers=H)).status_code == 422
    assert (await master.client.get(f"/api/v1/runs/{ghost}", headers=H)).status_code == 404
    run = await _run(master)
    tasks = [
        {"payload": {"url": "1"}, "run": run, "unique_key": "1"},
        {"payload": {"url": "1"}, "run": run, "unique_key": "1"},
        {"payload": {"url": "2"}, "run": ghost},
    ]
    r = await master.client.post(f"{TASKS}/batch", json={"tasks": tasks}, headers=H)
    results = r.json()["results"]
    assert results[0]["queued"] and results[1]["duplicate"] and ghost in results[2]["error"]


async def test_list_and_cancel(master: InProcess) -> None:
    runs = [await _run(master, name=f"r{i}") for i in range(3)]
    r = await master.client.get("/api/v1/runs?limit=2", headers=H)
    page = r.json()
    assert [x["run_id"] for x in page["runs"]] == runs[:0:-1] and page["next"]
    r = await master.client.get(f"/api/v1/runs?after={page['next']}", headers=H)
    assert r.json()["runs"][0]["run_id"] == runs[0]
    await master.client.post(TASKS, json={"payload": {"url": "x"}, "run": runs[0]}, headers=H)
    r = await master.client.delete(f"/api/v1/runs/{runs[0]}", headers=H)
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    assert r.json()["counters"]["cancelled"] == 1
    assert (await master.backend.queues.depths(SCRAPE)).pending == 0
    assert (await master.client.delete("/api/v1/runs/nope", headers=H)).status_code == 422
    assert (await master.client.delete(f"/api/v1/runs/{'0' * 32}", headers=H)).status_code == 404


async def test_metrics_show_the_live_runs(master: InProcess) -> None:
    run = await _run(master, name="crawl")
    ended = await _run(master)
    await master.client.post(TASKS, json={"payload": {"url": "x"}, "run": run}, headers=H)
    await master.client.delete(f"/api/v1/runs/{ended}", headers=H)
    text = (await master.client.get("/metrics", headers=H)).text
    assert "fleet_runs_live 1.0" in text
    line = f'fleet_run_tasks{{counter="pending",name="crawl",run="{run}"}} 1.0'
    assert line in text, text
    assert ended not in text
