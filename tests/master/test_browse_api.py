"""The task browser over real HTTP (a uvicorn master on Redis and on SQLite): pages of a
type's tasks by state walked by cursor, 401/403/404/422, and dead letters replayed or
deleted by a selection of ids."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core.catalog import catalog_entry
from fleet.core.records import PushRequest, TaskBody, now
from tests.master.conftest import ADMIN, OTHER_SCOPED, READ, SCOPED, auth
from tests.master.plugins import SCRAPE, Scraper

TASKS = f"/api/v1/automations/{SCRAPE}/tasks"
SELECTION = f"/api/v1/automations/{SCRAPE}/dead/selection"


@pytest.fixture
async def live(
    live_factory: Any, shared_url: str
) -> AsyncIterator[tuple[httpx.AsyncClient, Backend]]:
    """A live master, an admin client of it, and the backend as a worker sees it."""
    master = live_factory(shared_url, sweeper=False)
    side = await open_backend(shared_url)
    await side.catalog.put(SCRAPE, catalog_entry(Scraper))
    try:
        async with httpx.AsyncClient(
            base_url=master.url, headers=auth(ADMIN), timeout=30
        ) as client:
            yield client, side
    finally:
        await side.close()


def _req(tid: str, at: float, **kw: Any) -> PushRequest:
    return PushRequest(TaskBody(id=tid, payload={"url": "u"}, enqueued_at=at, **kw))


async def _kill(side: Backend, n: int, error: str = "boom") -> list[str]:
    out: list[str] = []
    for r in await side.queues.reserve(SCRAPE, k=n):
        await side.queues.nack(SCRAPE, r.body.id, r.token, delay_seconds=0, error=error, dead=True)
        out.append(r.body.id)
    return out


async def test_walks_pending_newest_first(live: tuple[httpx.AsyncClient, Backend]) -> None:
    client, side = live
    t = now() - 1_000
    await side.queues.push(
        SCRAPE, [_req(f"t{i:03d}", t + i, group="g" if i % 2 else None) for i in range(120)]
    )
    seen: list[str] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"state": "pending", "limit": 50}
        if cursor is not None:
            params["cursor"] = cursor
        r = await client.get(TASKS, params=params)
        assert r.status_code == 200, r.text
        page = r.json()
        seen += [item["id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [f"t{i:03d}" for i in reversed(range(120))]
    first = (await client.get(TASKS, params={"limit": 1})).json()["items"][0]
    assert first == {
        "id": "t119",
        "state": "pending",
        "priority": 0,
        "tier": "normal",
        "group": "g",
        "run": None,
        "attempt": 0,
        "enqueued_at": t + 119,
        "ready_at": None,
        "deadline": None,
        "last_error": None,
        "failed_at": None,
        "finished_at": None,
    }


async def test_done_tasks_by_run(live: tuple[httpx.AsyncClient, Backend]) -> None:
    client, side = live
    run = await side.runs.create(name="crawl")
    bodies = [
        TaskBody(id=f"r{i}", payload={"url": "u"}, enqueued_at=now(), run=run) for i in range(3)
    ]
    await side.queues.push(SCRAPE, [PushRequest(b) for b in bodies])
    await side.queues.push(SCRAPE, [_req("loose", now())])
    got = await side.queues.reserve(SCRAPE, k=4)
    assert all(await side.queues.ack(SCRAPE, [(r.body.id, r.token) for r in got]))
    r = await client.get(TASKS, params={"state": "done", "run": run})
    assert r.status_code == 200, r.text
    items = r.json()["items"]
    assert sorted(i["id"] for i in items) == ["r0", "r1", "r2"]
    assert all(i["state"] == "done" and i["run"] == run and i["finished_at"] for i in items)
    every = (await client.get(TASKS, params={"state": "done"})).json()["items"]
    assert len(every) == 4


async def test_dead_page_masks_credentials(live: tuple[httpx.AsyncClient, Backend]) -> None:
    client, side = live
    await side.queues.push(SCRAPE, [_req("d1", now() - 5)])
    await _kill(side, 1, error="GET http://bob:hunter2@proxy.example:8080 failed")
    r = await client.get(TASKS, params={"state": "dead"})
    assert r.status_code == 200, r.text
    (item,) = r.json()["items"]
    assert item["id"] == "d1" and item["state"] == "dead" and item["attempt"] == 1
    assert "hunter2" not in item["last_error"] and "proxy.example" in item["last_error"]


async def test_bad_requests_are_422_never_500(live: tuple[httpx.AsyncClient, Backend]) -> None:
    client, _ = live
    for params in (
        {"state": "finished"},
        {"state": "queued"},
        {"state": "done", "run": ""},
        {"state": "done", "run": "r" * 201},
        {"limit": 0},
        {"limit": 501},
        {"limit": "many"},
        {"cursor": "not-a-cursor"},
        {"cursor": ""},
        {"cursor": "W10"},  # base64 of "[]": JSON, but not a position
        {"cursor": "x" * 5000},
    ):
        r = await client.get(TASKS, params=params)
        assert r.status_code == 422, (params, r.status_code, r.text)
    assert (await client.get(TASKS, params={"limit": 500})).status_code == 200
    r = await client.get("/api/v1/automations/no-such-type/tasks")
    assert r.status_code == 404


async def test_tokens_and_scopes(live: tuple[httpx.AsyncClient, Backend]) -> None:
    client, side = live
    await side.queues.push(SCRAPE, [_req("s1", now())])
    await _kill(side, 1)
    body = {"ids": ["s1"], "action": "delete"}
    assert (await client.get(TASKS, headers={"Authorization": ""})).status_code == 401
    assert (await client.get(TASKS, headers=auth("wrong"))).status_code == 401
    assert (await client.get(TASKS, headers=auth(READ))).status_code == 200
    assert (await client.get(TASKS, headers=auth(SCOPED))).status_code == 200
    assert (await client.get(TASKS, headers=auth(OTHER_SCOPED))).status_code == 403
    for token in (READ, SCOPED, OTHER_SCOPED):
        r = await client.post(SELECTION, json=body, headers=auth(token))
        assert r.status_code == 403, (token, r.text)
    assert (
        await client.post(SELECTION, json=body, headers={"Authorization": ""})
    ).status_code == 401
    assert (await side.queues.depths(SCRAPE)).dead == 1  # none of those touched the DLQ


async def test_dead_selection_replay_and_delete(live: tuple[httpx.AsyncClient, Backend]) -> None:
    client, side = live
    t = now() - 100
    await side.queues.push(SCRAPE, [_req(f"d{i}", t + i, priority=-1) for i in range(4)])
    assert sorted(await _kill(side, 4)) == ["d0", "d1", "d2", "d3"]

    r = await client.post(SELECTION, json={"ids": ["d2", "nope", "d0", "d2"], "action": "replay"})
    assert r.status_code == 200, r.text
    assert r.json() == {
        "action": "replay",
        "done": ["d2", "d0"],
        "skipped": [],
        "unknown": ["nope"],
    }
    info = await side.queues.state(SCRAPE, "d2")
    assert (info.state, info.attempt, info.priority) == ("queued", 0, -1)
    pending = (await client.get(TASKS, params={"state": "pending"})).json()["items"]
    assert [i["id"] for i in pending] == ["d2", "d0"]

    r = await client.post(SELECTION, json={"ids": ["d3", "d2"], "action": "delete"})
    assert r.json() == {"action": "delete", "done": ["d3"], "skipped": [], "unknown": ["d2"]}
    dead = (await client.get(TASKS, params={"state": "dead"})).json()["items"]
    assert [i["id"] for i in dead] == ["d1"]

    for bad in (
        {"ids": [f"x{i}" for i in range(1_001)], "action": "delete"},
        {"ids": [], "action": "delete"},
        {"ids": ["d1"], "action": "explode"},
        {"ids": ["d1"]},
        {"ids": ["x" * 201], "action": "delete"},
        {"ids": [""], "action": "delete"},
        {"ids": "d1", "action": "replay"},
    ):
        r = await client.post(SELECTION, json=bad)
        assert r.status_code == 422, (bad, r.text)
    r = await client.post(
        SELECTION, json={"ids": [f"x{i}" for i in range(1_000)], "action": "replay"}
    )
    assert r.status_code == 200 and len(r.json()["unknown"]) == 1_000
    assert (await side.queues.depths(SCRAPE)).dead == 1


async def test_a_task_record_with_its_payload(live: tuple[httpx.AsyncClient, Backend]) -> None:
    client, side = live
    t = now()
    await side.queues.push(SCRAPE, [_req("p1", t, group="shop"), _req("p2", t + 1)])
    r = await client.get(f"{TASKS}/p1", params={"payload": "true"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["state"] == "queued" and body["payload"] == {"url": "u"}
    assert body["group"] == "shop" and body["run"] is None
    plain = (await client.get(f"{TASKS}/p1")).json()
    assert "payload" not in plain  # only when asked: a lookup can cost a list search
    got = await side.queues.reserve(SCRAPE, k=2)
    await side.queues.ack(SCRAPE, [(x.body.id, x.token) for x in got])
    done = (await client.get(f"{TASKS}/p1", params={"payload": "true"})).json()
    assert done["state"] == "done" and done["payload"] is None  # not kept once finished
    assert (await client.get(f"{TASKS}/p1", params={"payload": "maybe"})).status_code == 422
