"""The read of every worker's view that a master's readers share
(fleet/master/services/shared_views.py): one read for many concurrent readers, this
master's own writes visible at once, changes made elsewhere within the max age, and
an event hub that relays events while a slow read is under way."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from fleet.backends import open_backend
from fleet.core.errors import BackendError
from fleet.master.services.event_hub import EventHub
from fleet.master.services.shared_views import SharedWorkerViews
from tests.master.conftest import ADMIN, READ, SCOPED, InProcess, auth, memory_url
from tests.master.plugins import LOOP, SCRAPE
from tests.support.waits import until

H = auth(ADMIN)
A = f"/api/v1/automations/{SCRAPE}"


async def register_worker(backend: Any, wid: str, automation_type: str = SCRAPE) -> None:
    await backend.workers.register(automation_type, wid, {"host": "h1", "pid": 42})
    fields = {"state": "RUNNING", "last_seen": str(time.time()), "applied_gen": "0", "slots": "2"}
    await backend.workers.set_state(automation_type, wid, fields)


def views_of(master: InProcess) -> SharedWorkerViews:
    views: SharedWorkerViews = master.app.state.fleet.views
    return views


async def test_concurrent_readers_share_one_read(master: InProcess) -> None:
    for i in range(3):
        await register_worker(master.backend, f"w{i}")
    await register_worker(master.backend, "x1", automation_type=LOOP)
    c = master.client
    answers = await asyncio.gather(
        *(c.get("/api/v1/workers", headers=auth(READ)) for _ in range(20)),
        *(c.get("/api/v1/automations", headers=auth(READ)) for _ in range(5)),
    )
    assert all(r.status_code == 200 for r in answers)
    workers = [r.json() for r in answers[:20]]
    assert all(w == workers[0] for w in workers)
    assert [v["worker_id"] for v in workers[0]] == ["x1", "w0", "w1", "w2"]
    rows = {row["type"]: row for row in answers[20].json()}
    assert rows[SCRAPE]["workers"] == {"total": 3, "up": 3, "lagging": 0}
    assert views_of(master).reads == 1
    # a scoped token gets only its types, from the same read
    r = await c.get("/api/v1/workers", headers=auth(SCOPED))
    assert [v["worker_id"] for v in r.json()] == ["w0", "w1", "w2"]
    assert r.headers["content-type"] == "application/json"
    assert views_of(master).reads == 1


async def test_this_masters_writes_show_at_once(master: InProcess) -> None:
    b, c = master.backend, master.client
    await register_worker(b, "w1")
    await register_worker(b, "w2")

    async def listed() -> dict[str, dict[str, Any]]:
        r = await c.get("/api/v1/workers", headers=H)
        assert r.status_code == 200
        return {v["worker_id"]: v for v in r.json()}

    assert not (await listed())["w1"]["draining_requested"]
    assert (await c.post(f"{A}/workers/w1/drain", headers=H)).status_code == 200
    assert (await listed())["w1"]["draining_requested"]
    assert (await c.post(f"{A}/workers/w1/resume", headers=H)).status_code == 200
    assert not (await listed())["w1"]["draining_requested"]

    gen = (await listed())["w2"]["gen"]["desired"]
    r = await c.patch(f"{A}/config", json={"slots": 3}, headers=H)
    assert r.status_code == 200
    assert (await listed())["w2"]["gen"]["desired"] > gen
    r = await c.patch(f"{A}/workers/w2/config", json={"slots": 4}, headers=H)
    assert r.status_code == 200
    assert (await listed())["w2"]["gen"]["desired"] == r.json()["gen"]

    assert (await c.delete(f"{A}/workers/w1", headers=H)).json()["forgotten"] is True
    assert set(await listed()) == {"w2"}
    rows = {row["type"]: row for row in (await c.get("/api/v1/automations", headers=H)).json()}
    assert rows[SCRAPE]["workers"]["total"] == 1
    assert (await c.delete(A, headers=H)).status_code == 200
    assert await listed() == {}


async def test_a_change_made_elsewhere_shows_within_the_max_age() -> None:
    backend = await open_backend(memory_url())
    now = [100.0]
    views = SharedWorkerViews(backend, 5.0, max_age=2.0, refresh_after=1.0, clock=lambda: now[0])
    try:
        await register_worker(backend, "w1")
        first = await views.read()
        await register_worker(backend, "w2")
        # young enough: served as it is, nothing read again
        assert await views.read() is first and views.reads == 1
        # past refresh_after: still served, and the next read starts meanwhile
        now[0] += 1.5
        assert await views.read() is first
        await until(lambda: views.reads == 2, what="the background read")
        assert views.reads == 2
        fresh = await views.read()
        assert [v["worker_id"] for v in fresh.views] == ["w1", "w2"]
        # past max_age: the reader waits for a read of its own
        await backend.workers.forget(SCRAPE, "w1")
        now[0] += 2.5
        assert [v["worker_id"] for v in (await views.read()).views] == ["w2"]
        # invalidate(): the next reader waits for a read that starts after it
        await register_worker(backend, "w3")
        views.invalidate()
        assert [v["worker_id"] for v in (await views.read()).views] == ["w2", "w3"]
    finally:
        await views.close()
        await backend.close()


async def test_a_failed_read_is_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = await open_backend(memory_url())
    views = SharedWorkerViews(backend, 5.0)
    real = backend.workers.get_many
    calls = 0

    async def failing_once(pairs: list[tuple[str, str]]) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise BackendError("down for a moment")
        return await real(pairs)

    monkeypatch.setattr(backend.workers, "get_many", failing_once)
    try:
        await register_worker(backend, "w1")
        readers = [views.read() for _ in range(3)]
        outcomes = await asyncio.gather(*readers, return_exceptions=True)
        assert all(isinstance(o, BackendError) for o in outcomes)  # one read, shared
        assert [v["worker_id"] for v in (await views.read()).views] == ["w1"]
        assert calls == 2
    finally:
        await views.close()
        await backend.close()


async def test_events_are_relayed_while_a_slow_read_is_under_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend = await open_backend(memory_url())
    await backend.catalog.put("hub-slow-read", {"queue": {"type": "object"}})
    real = backend.workers.get_many
    slow = asyncio.Event()

    async def slow_get_many(pairs: list[tuple[str, str]]) -> Any:
        if slow.is_set():
            await asyncio.sleep(3.0)  # a read of many workers on a busy master
        return await real(pairs)

    monkeypatch.setattr(backend.workers, "get_many", slow_get_many)
    views = SharedWorkerViews(backend, 5.0, max_age=0.0, refresh_after=0.0)
    hub = EventHub(backend, heartbeat_seconds=5.0, views=views)
    stream = hub.stream(0.2)

    async def next_frame(want: str) -> Any:
        async for raw in stream:
            head, data = raw.decode().strip().split("\n")
            if head == f"event: {want}":
                return json.loads(data.removeprefix("data: "))
        raise AssertionError("the stream ended")

    try:
        await asyncio.wait_for(next_frame("workers"), 5)
        slow.set()
        await asyncio.sleep(0.3)  # the next tick's read is under way now
        started = time.monotonic()
        await backend.events.publish("hub-slow-read.emit", {"n": 1})
        frame = await asyncio.wait_for(next_frame("emit"), 5)
        assert frame == {"type": "hub-slow-read", "data": {"n": 1}}
        assert time.monotonic() - started < 1.0  # not held behind the 3 s read
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
        await hub.close()
        await views.close()
        await backend.close()
