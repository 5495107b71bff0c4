"""Schedules under hostile and heavy use (issue 24): ticks nobody else can forge, a
payload the type no longer accepts, catch-up after a long outage, tick keys that end
with the schedule's period. On every backend, through the master's routes where a
user would go."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from fleet.backends.base import Backend
from fleet.core.errors import ContractValueError
from fleet.core.schedule import ScheduleRecord, new_record, plan, tick_task_id
from fleet.core.submission import make_push_request
from fleet.master.services.schedule_check import catalog_check
from fleet.scheduler import fire_due
from fleet.scheduler.firer import tick_key_ttl
from fleet.scheduler.payloads import local_check
from tests.master.conftest import ADMIN, SCOPED, InProcess, auth, settings_for, start_in_process
from tests.master.plugins import SCRAPE

TASKS = f"/api/v1/automations/{SCRAPE}/tasks"
SCHEDULES = f"/api/v1/automations/{SCRAPE}/schedules"


@pytest.fixture
async def master(backend_url: str) -> AsyncIterator[InProcess]:
    inproc, lifespan = await start_in_process(settings_for(backend_url), sweeper=False)
    try:
        yield inproc
    finally:
        await inproc.client.aclose()
        await lifespan.__aexit__(None, None, None)


async def test_a_scoped_token_can_neither_suppress_nor_replace_a_tick(master: InProcess) -> None:
    body = {"id": "s-h", "every_seconds": 60, "payload": {"url": "https://admin/"}}
    created = await master.client.post(SCHEDULES, json=body, headers=auth(ADMIN))
    assert created.status_code == 201, created.text
    # The scoped token may read when the next tick comes...
    seen = await master.client.get(f"{SCHEDULES}/s-h", headers=auth(SCOPED))
    assert seen.status_code == 200
    tick = seen.json()["next_run"]
    forged = tick_task_id("s-h", tick)
    attacker = {"payload": {"url": "https://attacker/"}, "priority": -5}
    # ...but not take the tick's id or key, alone or in a batch.
    attempts: list[dict[str, Any]] = [
        {**attacker, "task_id": forged, "delay_seconds": 100000},
        {**attacker, "idempotency_key": forged, "ttl_seconds": 0.5},
        {**attacker, "task_id": "schedule:s-h:run:x"},
    ]
    for attempt in attempts:
        r = await master.client.post(TASKS, json=attempt, headers=auth(SCOPED))
        assert r.status_code == 422, r.text
        assert "schedule ticks" in r.text
    r = await master.client.post(f"{TASKS}/batch", json={"tasks": attempts}, headers=auth(SCOPED))
    assert r.status_code == 202
    assert all("error" in item for item in r.json()["results"]), r.text
    # ctx.submit and the Python client share the same rule.
    with pytest.raises(ContractValueError, match="schedule ticks"):
        make_push_request({"url": "u"}, task_id=forged)
    with pytest.raises(ContractValueError, match="schedule ticks"):
        make_push_request({"url": "u"}, idempotency_key=forged)
    # The tick fires with the schedule's own payload, and records its own task.
    report = await fire_due(master.backend, tick + 0.1)
    assert report.fired == 1
    state = await master.backend.queues.state(SCRAPE, forged)
    assert state.state == "queued"
    got = await master.client.get(f"{SCHEDULES}/s-h", headers=auth(ADMIN))
    assert got.json()["last_task_id"] == forged
    (res,) = await master.backend.queues.reserve(SCRAPE, k=10)
    assert res.body.id == forged and res.body.payload == {"url": "https://admin/"}
    assert res.body.priority == 0


def _ghost_entry() -> dict[str, Any]:
    # A type this process does not run: only the catalog knows its TaskPayload.
    schema = {
        "type": "object",
        "properties": {"sku": {"type": "string"}},
        "required": ["sku"],
        "additionalProperties": False,
    }
    return {"kind": "BatchAutomation", "queue": {"payload": schema}, "config": {}}


async def test_an_outdated_payload_is_not_enqueued(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    await backend.catalog.put("ghost", _ghost_entry())
    record = new_record("ghost", "old", {"every_seconds": 10, "payload": {"url": "u"}}, now=1000.0)
    await backend.schedules.put(record)
    check = catalog_check(backend)
    with caplog.at_level(logging.WARNING, logger="fleet.scheduler"):
        first = await fire_due(backend, record.next_run + 0.1, check)
        second = await fire_due(backend, record.next_run + 10.1, check)
    assert (first.fired, first.refused, second.fired, second.refused) == (0, 1, 0, 1)
    assert (await backend.queues.depths("ghost")).normal == 0
    stored = await backend.schedules.get("ghost", "old")
    assert isinstance(stored, ScheduleRecord)
    assert stored.last_error is not None and "sku" in stored.last_error
    assert stored.next_run == record.next_run + 20  # it moved on, tick by tick
    warnings = [r for r in caplog.records if "no longer fits" in r.getMessage()]
    assert len(warnings) == 1  # once, not once per tick
    # A payload that fits again fires, and the error goes.
    fixed = stored.evolve(definition={**stored.definition, "payload": {"sku": "a1"}})
    assert await backend.schedules.swap(stored, fixed)
    third = await fire_due(backend, fixed.next_run + 0.1, check)
    assert third.fired == 1
    again = await backend.schedules.get("ghost", "old")
    assert isinstance(again, ScheduleRecord) and again.last_error is None


async def test_the_worker_checks_the_types_it_runs() -> None:
    assert await local_check(SCRAPE, {"url": "u"}) is None
    error = await local_check(SCRAPE, {"link": "u"})
    assert error is not None and "url" in error
    assert await local_check("not-here", {"anything": 1}) is None


def test_a_days_catch_up_is_constant_time() -> None:
    definition = {"cron": "* * * * * *", "payload": {}, "misfire": "once"}
    record = new_record("t", "every-second", definition, now=1_700_000_000.0)
    later = record.next_run + 86_400.5
    t0 = time.process_time()
    step = plan(record, later)
    cpu = time.process_time() - t0
    assert step is not None and step.fire == pytest.approx(record.next_run + 86_400)
    assert step.next_run == step.fire + 1 and step.missed == pytest.approx(86_400, abs=1)
    assert cpu < 0.25, cpu  # walking the 86,400 missed ticks took ~1 s of CPU
    skip = plan(record.evolve(definition={**record.definition, "misfire": "skip"}), later)
    assert skip is not None and skip.fire is None and skip.next_run == step.next_run


def test_tick_keys_live_with_the_period() -> None:
    assert tick_key_ttl(1) == 300
    assert tick_key_ttl(3600) == 7200
    assert tick_key_ttl(30 * 86400) == 7 * 86400


async def test_schedules_are_capped_and_paged(backend_url: str) -> None:
    settings = settings_for(backend_url, max_schedules=5)
    inproc, lifespan = await start_in_process(settings, sweeper=False)
    try:
        client = inproc.client
        for i in range(5):
            body = {"id": f"s{i}", "every_seconds": 60, "payload": {"url": "u" * 1000}}
            r = await client.post(SCHEDULES, json=body, headers=auth(ADMIN))
            assert r.status_code == 201, r.text
        r = await client.post(
            SCHEDULES,
            json={"id": "s9", "every_seconds": 60, "payload": {"url": "u"}},
            headers=auth(ADMIN),
        )
        assert r.status_code == 409 and "FLEET_MAX_SCHEDULES" in r.text
        seen: list[str] = []
        after: str | None = None
        while True:
            params: dict[str, Any] = {"limit": 2} | ({"after": after} if after else {})
            page = (await client.get(SCHEDULES, params=params, headers=auth(SCOPED))).json()
            assert len(page["schedules"]) <= 2
            seen += [s["id"] for s in page["schedules"]]
            after = page["next"]
            if after is None:
                break
        assert seen == [f"s{i}" for i in range(5)]
        r = await client.get(SCHEDULES, params={"limit": 0}, headers=auth(ADMIN))
        assert r.status_code == 422
        # Deleting one makes room again.
        assert (await client.delete(f"{SCHEDULES}/s0", headers=auth(ADMIN))).status_code in (
            200,
            204,
        )
        r = await client.post(
            SCHEDULES,
            json={"id": "s9", "every_seconds": 60, "payload": {"url": "u"}},
            headers=auth(ADMIN),
        )
        assert r.status_code == 201, r.text
    finally:
        await inproc.client.aclose()
        await lifespan.__aexit__(None, None, None)


async def test_small_things_are_refused_clearly(master: InProcess) -> None:
    h = auth(ADMIN)
    groups = f"/api/v1/automations/{SCRAPE}/groups"
    for name in (".", ".."):
        r = await master.client.post(
            TASKS, json={"payload": {"url": "u"}, "group": name}, headers=h
        )
        assert r.status_code == 422 and "'.' or '..'" in r.text, r.text
    for name in ("a\u2028b", "evil\u202etxt.exe", "zero\u200bwidth"):
        r = await master.client.post(
            TASKS, json={"payload": {"url": "u"}, "group": name}, headers=h
        )
        assert r.status_code == 422 and "format characters" in r.text, r.text
        r = await master.client.post(
            TASKS, json={"payload": {"url": "u"}, "task_id": name}, headers=h
        )
        assert r.status_code == 422, r.text
    # Letters beyond ASCII are names like any other.
    r = await master.client.post(
        TASKS, json={"payload": {"url": "u"}, "group": "köln-ü"}, headers=h
    )
    assert r.status_code == 202, r.text
    r = await master.client.put(f"{groups}/g", json={"rate": "1/" + "9" * 30 + "d"}, headers=h)
    assert r.status_code == 422 and "366 days" in r.text, r.text
    r = await master.client.put(f"{groups}/g", json={"paused": "yes"}, headers=h)
    assert r.status_code == 422, r.text
    r = await master.client.put(f"{groups}/g", json={"concurrency": "2"}, headers=h)
    assert r.status_code == 422, r.text
    base = {"id": "s", "payload": {"url": "u"}}
    bad: list[tuple[dict[str, Any], str, str | None]] = [
        ({"every_seconds": True}, "every_seconds", None),
        ({"every_seconds": 60, "jitter_seconds": "10"}, "jitter_seconds", None),
        ({"every_seconds": 60, "enabled": "yes"}, "enabled", None),
        ({"every_seconds": 0.5}, "every_seconds", "at least 1 second"),
        ({"every_seconds": 10**9}, "every_seconds", "at most 366 days"),
        ({"every_seconds": 60, "jitter_seconds": -1}, "jitter_seconds", ">= 0"),
        ({"every_seconds": 60, "jitter_seconds": 10**9}, "jitter_seconds", "at most 366 days"),
    ]
    for change, field, words in bad:
        r = await master.client.post(SCHEDULES, json={**base, **change}, headers=h)
        assert r.status_code == 422, (change, r.text)
        detail = r.json()["detail"][0]
        assert detail["loc"][-1] == field or field in detail["loc"], (change, detail)
        if words is not None:
            assert words in detail["msg"], (change, detail)
