"""Runs over REST against hostile use (issue 40), on a live master over Redis and
SQLite: the callback's id, scoped tokens and the run's ``types``, delays past
``max_delay_seconds``, ``on_complete.type``, run ids, idle expiry and pages by size."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core.catalog import catalog_entry
from fleet.core.records import new_id
from fleet.core.runs import callback_task_id
from tests.master.conftest import ADMIN, SCOPED, auth
from tests.master.plugins import SCRAPE, Scraper

TASKS = f"/api/v1/automations/{SCRAPE}/tasks"
A = auth(ADMIN)
S = auth(SCOPED)  # scoped to SCRAPE


@pytest.fixture
async def live(
    live_factory: Any, shared_url: str
) -> AsyncIterator[tuple[httpx.AsyncClient, Backend]]:
    """A live master, a client of it (no token of its own) and the backend."""
    master = live_factory(shared_url, sweeper=False)
    side = await open_backend(shared_url)
    await side.catalog.put(SCRAPE, catalog_entry(Scraper))
    try:
        async with httpx.AsyncClient(base_url=master.url, timeout=30) as client:
            yield client, side
    finally:
        await side.close()


async def _run(client: httpx.AsyncClient, **body: Any) -> str:
    r = await client.post("/api/v1/runs", json=body, headers=A)
    assert r.status_code == 201, r.text
    return str(r.json()["run_id"])


def _no_backend_in(text: str, run: str = "") -> None:
    # The run id the answer echoes is random hex: a "6379" inside it is no port.
    shown = text.replace(run, "<run>") if run else text
    for leak in ("redis", ":6379", "127.0.0.1", ".lua", "fleet_", "sqlite", "Traceback"):
        assert leak not in shown, text


async def test_no_one_takes_the_callbacks_id(live: tuple[httpx.AsyncClient, Backend]) -> None:
    client, side = live
    run = await _run(
        client, on_complete={"type": SCRAPE, "payload": {"url": "real"}}, types=[SCRAPE]
    )
    forged = {
        "payload": {"url": "forged"},
        "task_id": callback_task_id(run),
        "delay_seconds": 5,
        "run": run,
    }
    for token in (S, A):
        r = await client.post(TASKS, json=forged, headers=token)
        assert r.status_code == 422 and "run-" in r.text, r.text
        r = await client.post(f"{TASKS}/batch", json={"tasks": [forged]}, headers=token)
        assert "run-" in r.json()["results"][0]["error"]
    r = await client.post(TASKS, json={"payload": {"url": "a"}, "run": run}, headers=S)
    assert r.status_code == 202, r.text
    task = (await side.queues.reserve(SCRAPE, k=5))[0]
    assert task.body.payload["url"] == "a"  # the forged task was never queued
    await side.queues.ack(SCRAPE, [(task.body.id, task.token)])
    callback = await side.queues.reserve(SCRAPE, k=5)
    assert [c.body.id for c in callback] == [callback_task_id(run)]
    assert callback[0].body.payload["url"] == "real"
    assert callback[0].body.payload["run"]["state"] == "done"


async def test_a_scoped_token_joins_only_runs_that_name_its_type(
    live: tuple[httpx.AsyncClient, Backend],
) -> None:
    client, _ = live
    unnamed = await _run(client)
    named = await _run(client, types=[SCRAPE, "elsewhere"])
    others = await _run(client, types=["elsewhere"])
    got = (await client.get(f"/api/v1/runs/{named}", headers=A)).json()
    assert got["types"] == sorted(["elsewhere", SCRAPE]) and got["max_delay_seconds"] == 86_400
    for run in (unnamed, others):
        r = await client.post(TASKS, json={"payload": {"url": "x"}, "run": run}, headers=S)
        assert r.status_code == 403 and "types" in r.json()["detail"], r.text
        batch = {"tasks": [{"payload": {"url": "x"}, "run": run}]}
        r = await client.post(f"{TASKS}/batch", json=batch, headers=S)
        assert "types" in r.json()["results"][0]["error"]
        r = await client.post(TASKS, json={"payload": {"url": "x"}, "run": run}, headers=A)
        assert r.status_code == 202 and r.json()["queued"]  # the admin token as before
    r = await client.post(TASKS, json={"payload": {"url": "x"}, "run": named}, headers=S)
    assert r.status_code == 202 and r.json()["queued"]
    r = await client.post("/api/v1/runs", json={"types": ["a b/../x"]}, headers=A)
    assert r.status_code == 422


async def test_no_task_is_delayed_past_its_runs_max_delay(
    live: tuple[httpx.AsyncClient, Backend],
) -> None:
    client, _ = live
    run = await _run(client, types=[SCRAPE], max_delay_seconds=60)
    default = await _run(client, types=[SCRAPE])
    late = {"payload": {"url": "x"}, "run": run, "delay_seconds": 61}
    r = await client.post(TASKS, json=late, headers=S)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "delay_seconds"]
    r = await client.post(f"{TASKS}/batch", json={"tasks": [late]}, headers=S)
    assert "max_delay_seconds" in r.json()["results"][0]["error"]
    year = {"payload": {"url": "x"}, "run": default, "delay_seconds": 31_536_000}
    assert (await client.post(TASKS, json=year, headers=S)).status_code == 422
    ok = {"payload": {"url": "x"}, "run": run, "delay_seconds": 60}
    assert (await client.post(TASKS, json=ok, headers=S)).status_code == 202
    r = await client.post("/api/v1/runs", json={"max_delay_seconds": -1}, headers=A)
    assert r.status_code == 422


@pytest.mark.parametrize("bad", ["sec-cb:counters", "a b/../x", "*"])
async def test_on_complete_type_is_a_type_name(
    live: tuple[httpx.AsyncClient, Backend], bad: str
) -> None:
    client, _ = live
    r = await client.post("/api/v1/runs", json={"on_complete": {"type": bad}}, headers=A)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "on_complete", "type"]
    assert (await client.get("/api/v1/automations", headers=A)).status_code == 200


async def test_an_unknown_on_complete_type_is_a_404_with_a_hint(
    live: tuple[httpx.AsyncClient, Backend],
) -> None:
    client, _ = live
    r = await client.post("/api/v1/runs", json={"on_complete": {"type": "m-scrap"}}, headers=A)
    assert r.status_code == 404 and f"did you mean {SCRAPE!r}" in r.json()["detail"], r.text


async def test_run_ids_are_checked_before_the_store(
    live: tuple[httpx.AsyncClient, Backend],
) -> None:
    client, _ = live
    run = await _run(client, types=[SCRAPE])
    r = await client.post(TASKS, json={"payload": {"url": "x"}, "run": run}, headers=S)
    assert r.status_code == 202  # the run has a :live set now
    for bad in (f"{run}:live", f"{run}:keys:0", "nope", run.upper()):
        for method, path in (("GET", f"/api/v1/runs/{bad}"), ("DELETE", f"/api/v1/runs/{bad}")):
            r = await client.request(method, path, headers=A)
            assert r.status_code == 422, (method, bad, r.text)
            _no_backend_in(r.text, run)
        for token in (S, A):
            body = {"payload": {"url": "x"}, "run": bad}
            r = await client.post(TASKS, json=body, headers=token)
            assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "run"]
            _no_backend_in(r.text, run)
            r = await client.post(f"{TASKS}/batch", json={"tasks": [body]}, headers=token)
            assert "run id" in r.json()["results"][0]["error"]
    r = await client.get("/api/v1/runs", params={"after": f"{run}:live"}, headers=A)
    assert r.status_code == 422
    unknown = new_id()
    assert (await client.get(f"/api/v1/runs/{unknown}", headers=A)).status_code == 404
    assert (await client.delete(f"/api/v1/runs/{unknown}", headers=A)).status_code == 404
    body = {"payload": {"url": "x"}, "run": unknown}
    assert (await client.post(TASKS, json=body, headers=S)).status_code == 404


async def test_a_page_of_runs_is_bounded_by_size(
    live: tuple[httpx.AsyncClient, Backend],
) -> None:
    client, _ = live
    big = {"type": SCRAPE, "payload": {"url": "x" * 300_000}}
    made = [await _run(client, on_complete=big) for _ in range(4)]
    small = await _run(client)
    seen: list[str] = []
    sizes: list[int] = []
    after: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 500, **({"after": after} if after else {})}
        r = await client.get("/api/v1/runs", params=params, headers=A)
        assert r.status_code == 200
        sizes.append(len(r.content))
        seen += [x["run_id"] for x in r.json()["runs"]]
        after = r.json()["next"]
        if after is None:
            break
    assert seen == [small, *made[::-1]]  # every run once, newest first
    assert len(sizes) == 2 and max(sizes) <= 1_100_000


async def test_an_oversized_on_complete_is_refused(
    live: tuple[httpx.AsyncClient, Backend],
) -> None:
    client, _ = live
    big = {"on_complete": {"type": SCRAPE, "payload": {"url": "x" * (1 << 20)}}}
    r = await client.post("/api/v1/runs", json=big, headers=A)
    assert r.status_code == 413


async def test_a_run_never_started_expires(
    live_factory: Any, shared_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEET_RUN_IDLE_TTL_SECONDS", "0.5")
    master = live_factory(shared_url, sweeper=False)
    async with httpx.AsyncClient(base_url=master.url, timeout=30) as client:
        run = await _run(client)
        assert (await client.get(f"/api/v1/runs/{run}", headers=A)).status_code == 200
        await asyncio.sleep(0.8)
        assert (await client.get(f"/api/v1/runs/{run}", headers=A)).status_code == 404
        listed = (await client.get("/api/v1/runs", headers=A)).json()["runs"]
        assert run not in [x["run_id"] for x in listed]
