"""``GET .../tasks/{id}?wait=`` on the memory backend, in process (the live test runs
it through real processes on SQLite and Redis): the answer comes when the task
ends or when the time is up; out-of-range waits are 422."""

from __future__ import annotations

import asyncio
import time

from tests.master.conftest import ADMIN, InProcess, auth
from tests.master.plugins import SCRAPE

H = auth(ADMIN)
TASKS = f"/api/v1/automations/{SCRAPE}/tasks"


async def _submit(master: InProcess) -> str:
    r = await master.client.post(TASKS, json={"payload": {"url": "u"}}, headers=H)
    assert r.status_code == 202, r.text
    task_id: str = r.json()["task_id"]
    return task_id


async def test_out_of_range_waits_are_422(master: InProcess) -> None:
    task_id = await _submit(master)
    for bad in ("0", "-2", "60.5", "x"):
        r = await master.client.get(f"{TASKS}/{task_id}?wait={bad}", headers=H)
        assert r.status_code == 422, (bad, r.text)
        assert r.json()["detail"][0]["loc"] == ["query", "wait"]


async def test_the_wait_times_out_with_the_current_state(master: InProcess) -> None:
    task_id = await _submit(master)
    started = time.monotonic()
    r = await master.client.get(f"{TASKS}/{task_id}?wait=0.4", headers=H)
    took = time.monotonic() - started
    assert r.status_code == 200 and r.json()["state"] == "queued", r.text
    assert r.json()["submitted_at"] is not None and r.json()["outputs"] == []
    assert 0.35 <= took < 2, took


async def test_the_wait_answers_when_the_task_ends(master: InProcess) -> None:
    task_id = await _submit(master)
    backend = master.backend

    async def work() -> None:
        await asyncio.sleep(0.3)
        (res,) = await backend.queues.reserve(SCRAPE, k=1)
        await backend.queues.mark_started(SCRAPE, [(task_id, res.token)])
        await backend.streams.push(
            SCRAPE, {"title": "t"}, worker_id="w", task_id=task_id, attempt=1
        )
        await backend.streams.progress(SCRAPE, task_id, attempt=1, fraction=1.0, message="ok")
        assert await backend.queues.ack(SCRAPE, [(task_id, res.token)]) == [True]

    worker = asyncio.create_task(work())
    started = time.monotonic()
    r = await master.client.get(f"{TASKS}/{task_id}?wait=20", headers=H)
    took = time.monotonic() - started
    await worker
    assert r.status_code == 200, r.text
    record = r.json()
    assert record["state"] == "done" and took < 5, (record, took)
    assert [o["payload"] for o in record["outputs"]] == [{"title": "t"}]
    assert record["progress"]["message"] == "ok"


async def test_a_progress_message_is_masked(master: InProcess) -> None:
    task_id = await _submit(master)
    backend = master.backend
    await backend.queues.reserve(SCRAPE, k=1)
    secret = "via http://user:hunter2@proxy.example:8080"
    await backend.streams.progress(SCRAPE, task_id, attempt=1, fraction=None, message=secret)
    r = await master.client.get(f"{TASKS}/{task_id}", headers=H)
    assert "hunter2" not in r.text and r.json()["progress"]["message"].startswith("via http://")
