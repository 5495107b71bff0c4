"""One corrupt record affects only itself, as the master shows it: with a catalog
entry, worker records and dead letters planted straight into the storage of every
backend, ``/automations``, ``/workers``, ``/catalog``, ``/metrics``, ``/dead`` and
the event stream answer, the bad records marked and the rest intact; ``fleet
doctor`` lists them; the master re-publishes its own entry that cannot be read;
and, over real HTTP, a live worker puts its own record right within seconds."""

from __future__ import annotations

import subprocess
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from fleet.cli.doctor import check_backend, check_records
from fleet.core.catalog import catalog_entry
from fleet.core.records import PushRequest, TaskBody
from fleet.core.stored import entry_unreadable
from tests.master.conftest import ADMIN, InProcess, auth, settings_for, start_in_process
from tests.master.plugins import SCRAPE, Scraper
from tests.master.test_e2e_worker import E2E, backend_for_e2e, eventually, worker
from tests.master.test_event_hub import Frames
from tests.master.test_metrics_events import EventReader
from tests.support.corrupt import NOT_UTF8, Planter
from tests.support.waits import until

__all__ = ["backend_for_e2e", "worker"]  # fixtures shared with the e2e test

GOOD, BAD = "cr-good", "cr-bad"
H = auth(ADMIN)
API = "/api/v1"


@pytest.fixture
async def fleet(backend_url: str) -> AsyncIterator[tuple[InProcess, Planter]]:
    """An in-process master on each backend, with a fleet whose records are then
    corrupted: GOOD (a batch type, two workers, one of them damaged, a DLQ with a
    readable and an unreadable entry) and BAD (a catalog entry that is not JSON)."""
    inproc, lifespan = await start_in_process(
        settings_for(backend_url), sweeper=False, catalog_check_seconds=3600
    )
    b = inproc.backend
    entry = catalog_entry(Scraper)
    for t in (GOOD, BAD):
        await b.catalog.put(t, entry | {"type": t})
    for wid in ("w-ok", "w-bad", "w-state"):
        await b.workers.register(GOOD, wid, {"host": "h", "pid": 7})
        await b.workers.set_state(GOOD, wid, {"state": "RUNNING", "last_seen": str(time.time())})
        await b.workers.put_stats(GOOD, wid, {"slots": {"busy": 0, "total": 1}})
        assert await b.configs.put_desired(GOOD, wid, {"slots": 1}, 3)
    await b.workers.register(BAD, "w-of-bad", {"host": "h"})
    await b.queues.push(
        GOOD, [PushRequest(TaskBody(id="dead-ok", payload={"url": "u"}, max_attempts=1))]
    )
    (res,) = await b.queues.reserve(GOOD)
    assert await b.queues.nack(GOOD, "dead-ok", res.token, delay_seconds=0, error="boom") == "dead"

    planter = Planter(backend_url)
    planter.catalog(BAD, "{not json at all")
    planter.worker(GOOD, "w-bad", "stats", "garbage")
    planter.worker(GOOD, "w-bad", "config", NOT_UTF8)
    planter.worker(GOOD, "w-bad", "gen", "zz")
    planter.worker(GOOD, "w-state", "state", "garbage")
    if planter.holds_raw_tasks:
        planter.dead(GOOD, "dead-bad", "{nope" + "z" * 1000)
    try:
        yield inproc, planter
    finally:
        await inproc.client.aclose()
        await lifespan.__aexit__(None, None, None)


async def _get(c: httpx.AsyncClient, path: str) -> Any:
    r = await c.get(API + path, headers=H)
    assert r.status_code == 200, (path, r.status_code, r.text)
    return r.json()


async def test_every_view_answers_with_the_bad_records_marked(
    fleet: tuple[InProcess, Planter],
) -> None:
    inproc, planter = fleet
    c = inproc.client

    rows = {row["type"]: row for row in await _get(c, "/automations")}
    assert rows[GOOD]["kind"] == "BatchAutomation" and "unreadable" not in rows[GOOD]
    assert rows[GOOD]["workers"]["total"] == 3
    assert rows[GOOD]["queue"]["dead"] == (2 if planter.holds_raw_tasks else 1)
    assert rows[BAD]["catalogued"] and "not JSON" in rows[BAD]["unreadable"]
    assert rows[BAD]["kind"] is None and rows[BAD]["workers"]["total"] == 1

    views = {v["worker_id"]: v for v in await _get(c, "/workers")}
    assert views["w-ok"]["unreadable"] == [] and views["w-ok"]["up"]
    assert views["w-ok"]["gen"] == {"desired": 3, "applied": 0}
    bad = views["w-bad"]
    assert bad["unreadable"] == ["config", "gen", "stats"]
    assert bad["up"] and bad["state"] == "RUNNING" and bad["hardware"]["host"] == "h"
    assert bad["gen"]["desired"] == 0 and bad["slots"]["busy"] == 0
    assert views["w-state"]["unreadable"] == ["state"] and not views["w-state"]["up"]
    assert views["w-state"]["state"] == "DOWN" and views["w-state"]["hardware"]["pid"] == 7
    assert len(await _get(c, f"/automations/{GOOD}/workers")) == 3

    one = await _get(c, f"/automations/{GOOD}/workers/w-bad")
    assert one["unreadable"] == ["config", "gen", "stats"] and one["stats"] is None
    assert one["config"]["desired"] is None and one["config"]["desired_gen"] == 0

    catalog = await _get(c, "/catalog")
    assert catalog[GOOD]["queue"] and entry_unreadable(catalog[GOOD]) is None
    assert catalog[BAD]["type"] == BAD and catalog[BAD]["raw"] == "{not json at all"
    assert "not JSON" in catalog[BAD]["unreadable"] and "queue" not in catalog[BAD]
    assert (await _get(c, f"/catalog/{BAD}"))["unreadable"] == catalog[BAD]["unreadable"]

    dead = await _get(c, f"/automations/{GOOD}/dead")
    assert dead[0]["id"] == "dead-ok" and dead[0]["last_error"] == "boom"
    if planter.holds_raw_tasks:
        marker = dead[1]
        assert marker["unreadable"].startswith("not JSON")
        assert marker["raw"].startswith("{nopezzz") and len(marker["raw"]) <= 201
        assert marker["last_error"].startswith("the stored body could not be read")
        assert marker["id"] == ("dead-bad" if planter.kind == "sqlite" else "")
    assert await _get(c, f"/automations/{BAD}/dead") == []
    # the routes that need the type's schemas say why they cannot serve it now
    r = await c.post(f"{API}/automations/{BAD}/tasks", headers=H, json={"payload": {"url": "u"}})
    assert r.status_code == 503 and "cannot be read" in r.json()["detail"]
    r = await c.patch(f"{API}/automations/{BAD}/config", headers=H, json={"slots": 2})
    assert r.status_code == 503 and "cannot be read" in r.json()["detail"]
    r = await c.post(f"{API}/automations/{GOOD}/tasks", headers=H, json={"payload": {"url": "u"}})
    assert r.status_code == 202, r.text

    r = await c.get("/metrics", headers=H)
    assert r.status_code == 200, r.text
    text = r.text
    assert f'fleet_unreadable_records{{record="catalog",type="{BAD}"}} 1.0' in text
    for part in ("config", "gen", "stats", "state"):
        assert f'fleet_unreadable_records{{record="{part}",type="{GOOD}"}} 1.0' in text
    assert f'fleet_workers{{state="RUNNING",type="{GOOD}"}} 2.0' in text
    assert f'fleet_queue_depth{{state="normal",type="{GOOD}"}} 1.0' in text


async def test_the_event_stream_keeps_answering(fleet: tuple[InProcess, Planter]) -> None:
    inproc, _ = fleet
    hub = inproc.app.state.fleet.events
    frames = Frames(hub.stream(0.1))
    try:
        seen: dict[str, Any] = {}
        while not {"hello", "depths", "workers", "types"} <= set(seen):
            name, data = await frames.next(timeout=10)
            assert name != "error", data
            seen[name] = data
        assert BAD in seen["hello"]["types"] and GOOD in seen["depths"]
        views = {w["worker_id"]: w for w in seen["workers"]}
        assert views["w-bad"]["unreadable"] == ["config", "gen", "stats"]
        types = {row["type"]: row for row in seen["types"]}
        assert "not JSON" in types[BAD]["unreadable"] and "unreadable" not in types[GOOD]
        # and it goes on ticking
        for _ in range(3):
            name, data = await frames.next(timeout=10)
            assert name != "error", data
    finally:
        await frames.stream.aclose()  # type: ignore[attr-defined]


async def test_doctor_lists_the_bad_records(fleet: tuple[InProcess, Planter]) -> None:
    inproc, planter = fleet
    checks = await check_backend(inproc.backend.url)
    assert checks[0].name == "backend" and checks[0].status == "ok"
    listed = [c.detail for c in checks if c.name == "records"]
    assert all(c.status == "warn" for c in checks if c.name == "records")
    assert any(d.startswith(f"catalog entry of {BAD}: ") and "not JSON" in d for d in listed)
    assert f"worker w-bad of {GOOD}: unreadable config, gen, stats" in listed
    assert f"worker w-state of {GOOD}: unreadable state" in listed
    if planter.holds_raw_tasks:
        shown = "dead-bad" if planter.kind == "sqlite" else "(no id)"
        assert any(d.startswith(f"dead letter {shown} of {GOOD}: not JSON") for d in listed)
    assert len(listed) == (4 if planter.holds_raw_tasks else 3)


async def test_doctor_says_ok_when_every_record_reads(backend_url: str) -> None:
    inproc, lifespan = await start_in_process(settings_for(backend_url), sweeper=False)
    try:
        checks = await check_records(inproc.backend)
        assert [(c.name, c.status) for c in checks] == [("records", "ok")]
    finally:
        await inproc.client.aclose()
        await lifespan.__aexit__(None, None, None)


async def test_the_master_republishes_its_own_entry_that_cannot_be_read(
    backend_url: str,
) -> None:
    inproc, lifespan = await start_in_process(
        settings_for(backend_url), sweeper=False, catalog_check_seconds=0.1
    )
    try:
        assert await inproc.backend.catalog.get(SCRAPE) is not None
        Planter(backend_url).catalog(SCRAPE, NOT_UTF8)

        async def readable() -> bool:
            entry = await inproc.backend.catalog.get(SCRAPE)
            return entry is not None and entry_unreadable(entry) is None

        await until(readable, interval=0.05, what="the master to re-publish its entry")
    finally:
        await inproc.client.aclose()
        await lifespan.__aexit__(None, None, None)


async def test_a_live_fleet_answers_and_heals_over_http(
    live_factory: Any, backend_for_e2e: str, worker: subprocess.Popen[str]
) -> None:
    """A real worker process and a live master: its record and its type's catalog
    entry corrupted under it, every route (and the SSE stream) keeps answering 200,
    and the worker's next heartbeats put everything right."""
    live = live_factory(backend_for_e2e, sweeper=False)
    planter = Planter(backend_for_e2e)
    base = f"{API}/automations/{E2E}"
    async with httpx.AsyncClient(base_url=live.url, headers=H, timeout=30) as c:

        async def view() -> dict[str, Any]:
            r = await c.get(f"{base}/workers/w-e2e")
            assert r.status_code in (200, 404), r.text
            return r.json() if r.status_code == 200 else {}

        async def settled() -> bool:
            v = await view()
            return bool(v.get("up")) and v["gen"]["applied"] > 0 and not v["unreadable"]

        await eventually(settled, "the worker to be up with a config")
        async with c.stream("GET", f"{API}/events?interval=0.2") as response:
            assert response.status_code == 200
            events = EventReader(response)
            await events.next("workers")
            for part in ("config", "gen", "stats"):
                planter.worker(E2E, "w-e2e", part, "garbage")
            planter.catalog(E2E, "{not json")
            for path in ("/automations", "/workers", "/catalog", f"/automations/{E2E}/dead"):
                r = await c.get(API + path)
                assert r.status_code == 200, (path, r.text)
            assert (await c.get("/metrics")).status_code == 200
            # the stream went on; the frames after the damage are whole
            workers = await events.next("workers")
            assert [w["worker_id"] for w in workers] == ["w-e2e"]

        async def healed() -> bool:
            v = await view()
            entry = (await c.get(f"{API}/catalog/{E2E}")).json()
            return bool(v) and not v["unreadable"] and "unreadable" not in entry

        await eventually(healed, "the worker to rewrite its record", timeout=10)
        v = await view()
        assert v["gen"]["desired"] == v["gen"]["applied"] > 0
        r = await c.post(f"{base}/tasks", json={"payload": {"n": 3}})
        assert r.status_code == 202, r.text
