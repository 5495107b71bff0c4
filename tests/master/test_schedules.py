"""The schedules routes: create (every and cron), read, list, validation (422 naming
the field, never a 500), duplicates, PATCH (pause, resume, retime, payload), run now,
delete, scopes, and a stored record that cannot be read."""

from __future__ import annotations

import json
import time
from typing import Any

from fleet.core.schedule import new_record
from tests.master.conftest import ADMIN, OTHER_SCOPED, READ, SCOPED, InProcess, auth
from tests.master.plugins import LOOP, SCRAPE

H = auth(ADMIN)
BASE = f"/api/v1/automations/{SCRAPE}/schedules"
FAR = time.time() + 10 * 366 * 86400


async def create(master: InProcess, **body: Any) -> dict[str, Any]:
    body.setdefault("payload", {"url": "https://example.com/"})
    r = await master.client.post(BASE, json=body, headers=H)
    assert r.status_code == 201, r.text
    out: dict[str, Any] = r.json()
    return out


async def due_ids(master: InProcess) -> list[str]:
    return [rec.id for rec in await master.backend.schedules.due(FAR)]


async def test_create_every_and_cron_then_get_and_list(master: InProcess) -> None:
    before = time.time()
    s = await create(master, id="often", every_seconds=60, priority=1, group="g")
    assert (s["id"], s["every_seconds"], s["cron"], s["timezone"]) == ("often", 60.0, None, "UTC")
    assert (s["priority"], s["group"], s["enabled"], s["misfire"]) == (1, "g", True, "once")
    assert s["declared"] is False and s["last_run"] is None and s["last_task_id"] is None
    assert before < s["next_run"] <= time.time() + 60 and s["next_run"] % 60 == 0
    c = await create(
        master,
        id="berlin.hourly",
        cron="0  *  * * *",
        timezone="Europe/Berlin",
        payload={"url": "u", "depth": 2},
        misfire="skip",
        jitter_seconds=5,
        max_attempts=3,
    )
    assert (c["cron"], c["every_seconds"], c["timezone"]) == ("0 * * * *", None, "Europe/Berlin")
    assert (c["misfire"], c["jitter_seconds"], c["max_attempts"]) == ("skip", 5.0, 3)
    assert c["payload"] == {"url": "u", "depth": 2}
    assert c["next_run"] % 3600 == 0
    r = await master.client.get(f"{BASE}/often", headers=H)
    assert r.status_code == 200 and r.json() == s
    listed = (await master.client.get(BASE, headers=auth(READ))).json()["schedules"]
    assert [x["id"] for x in listed] == ["berlin.hourly", "often"]
    assert sorted(await due_ids(master)) == ["berlin.hourly", "often"]


async def test_invalid_definitions_are_422_naming_the_field(master: InProcess) -> None:
    ok = {"id": "s", "every_seconds": 60, "payload": {"url": "u"}}
    cases: list[tuple[dict[str, Any], list[Any]]] = [
        ({"cron": "61 * * * *", "every_seconds": None}, ["body", "cron"]),
        ({"cron": "every hour", "every_seconds": None}, ["body", "cron"]),
        ({"every_seconds": 0.5}, ["body", "every_seconds"]),
        ({"cron": "0 * * * *"}, ["body", "cron"]),  # both
        ({"every_seconds": None}, ["body", "cron"]),  # neither
        ({"timezone": "Mars/Olympus"}, ["body", "timezone"]),
        ({"misfire": "twice"}, ["body", "misfire"]),
        ({"payload": {"depth": 1}}, ["body", "payload", "url"]),
        ({"payload": {"url": "u", "depth": 9}}, ["body", "payload", "depth"]),
        ({"colour": "blue"}, ["body", "colour"]),
        ({"id": "no spaces"}, ["body", "id"]),
        ({"id": ""}, ["body", "id"]),
        ({"group": "a\x00"}, ["body", "group"]),
        ({"max_attempts": 0}, ["body", "max_attempts"]),
        ({"jitter_seconds": -1}, ["body", "jitter_seconds"]),
        ({"priority": 10**9}, ["body", "priority"]),
    ]
    for change, loc in cases:
        r = await master.client.post(BASE, json={**ok, **change}, headers=H)
        assert r.status_code == 422, (change, r.text)
        assert r.json()["detail"][0]["loc"] == loc, (change, r.json())
    r = await master.client.post(
        BASE,
        content=b'{"id": "s", "every_seconds": NaN, "payload": {"url": "u"}}',
        headers={**H, "Content-Type": "application/json"},
    )
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "every_seconds"]
    r = await master.client.post(
        BASE,
        content=b'{"id": "s", "every_seconds": 5, "payload": {"url": "u", "x": Infinity}}',
        headers={**H, "Content-Type": "application/json"},
    )
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "payload", "x"]
    # JSON text may carry a lone surrogate; no backend stores one (and a 422 echoing
    # it is still valid JSON)
    for raw, loc in [
        (b'{"url": "\\ud800"}', ["body", "payload", "url"]),
        (b'{"url": "u", "\\udc00": 1}', ["body", "payload"]),
    ]:
        content = b'{"id": "s", "every_seconds": 5, "payload": ' + raw + b"}"
        r = await master.client.post(
            BASE, content=content, headers={**H, "Content-Type": "application/json"}
        )
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == loc, r.text
    content = b'{"id": "s", "cron": "0 * * * *", "timezone": "\\ud800", "payload": {}}'
    r = await master.client.post(
        BASE, content=content, headers={**H, "Content-Type": "application/json"}
    )
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "timezone"]
    assert (await master.client.get(BASE, headers=H)).json() == {"schedules": [], "next": None}
    assert await due_ids(master) == []


async def test_a_duplicate_id_is_409(master: InProcess) -> None:
    await create(master, id="once", every_seconds=10)
    r = await master.client.post(
        BASE, json={"id": "once", "cron": "* * * * *", "payload": {"url": "v"}}, headers=H
    )
    assert r.status_code == 409 and "PATCH" in r.json()["detail"]
    assert (await master.client.get(f"{BASE}/once", headers=H)).json()["every_seconds"] == 10


async def test_pause_and_resume(master: InProcess) -> None:
    s = await create(master, id="p", every_seconds=3600)
    r = await master.client.patch(f"{BASE}/p", json={"enabled": False}, headers=H)
    assert r.status_code == 200, r.text
    paused = r.json()
    assert paused["enabled"] is False and paused["next_run"] == s["next_run"]
    assert paused["updated_at"] >= s["updated_at"]
    assert await due_ids(master) == []
    # pausing again, or changing a paused schedule's priority, keeps it out
    r = await master.client.patch(f"{BASE}/p", json={"priority": -1}, headers=H)
    assert r.status_code == 200 and r.json()["priority"] == -1 and not r.json()["enabled"]
    assert await due_ids(master) == []
    # a resumed schedule starts from the next tick after now (no catch-up)
    record = await master.backend.schedules.get(SCRAPE, "p")
    await master.backend.schedules.put(record.evolve(next_run=1000.0))
    r = await master.client.patch(f"{BASE}/p", json={"enabled": True}, headers=H)
    assert r.status_code == 200
    resumed = r.json()
    assert resumed["enabled"] is True and time.time() < resumed["next_run"] <= time.time() + 3600
    assert await due_ids(master) == ["p"]
    # an unrelated change keeps the next run
    r = await master.client.patch(f"{BASE}/p", json={"jitter_seconds": 2}, headers=H)
    assert r.json()["next_run"] == resumed["next_run"] and r.json()["jitter_seconds"] == 2.0


async def test_patch_switches_timing_and_revalidates(master: InProcess) -> None:
    await create(master, id="t", every_seconds=60, group="g", max_attempts=2)
    r = await master.client.patch(
        f"{BASE}/t", json={"cron": "30 6 * * *", "timezone": "America/New_York"}, headers=H
    )
    assert r.status_code == 200, r.text
    s = r.json()
    assert (s["cron"], s["every_seconds"], s["timezone"]) == (
        "30 6 * * *",
        None,
        "America/New_York",
    )
    assert s["next_run"] > time.time() and s["next_run"] % 60 == 0
    assert s["group"] == "g" and s["max_attempts"] == 2
    r = await master.client.patch(
        f"{BASE}/t", json={"every_seconds": 7200, "group": None, "max_attempts": None}, headers=H
    )
    s = r.json()
    assert (s["cron"], s["every_seconds"], s["group"], s["max_attempts"]) == (
        None,
        7200.0,
        None,
        None,
    )
    assert s["timezone"] == "America/New_York" and s["next_run"] % 7200 == 0
    bad: list[tuple[dict[str, Any], list[Any]]] = [
        ({"every_seconds": None}, ["body", "cron"]),
        ({"cron": "0 * * * *", "every_seconds": 5}, ["body", "cron"]),
        ({"every_seconds": 0}, ["body", "every_seconds"]),
        ({"timezone": "Nowhere"}, ["body", "timezone"]),
        ({"payload": {"url": 5}}, ["body", "payload", "url"]),
        ({"enabled": None}, ["body", "enabled"]),
        ({"priority": None}, ["body", "priority"]),
        ({"misfire": None}, ["body", "misfire"]),
        ({"jitter_seconds": None}, ["body", "jitter_seconds"]),
        ({"id": "renamed"}, ["body", "id"]),
    ]
    for body, loc in bad:
        r = await master.client.patch(f"{BASE}/t", json=body, headers=H)
        assert r.status_code == 422, (body, r.text)
        assert r.json()["detail"][0]["loc"] == loc, (body, r.json())
    assert (await master.client.get(f"{BASE}/t", headers=H)).json() == s
    r = await master.client.patch(f"{BASE}/t", json={"timezone": None}, headers=H)
    assert r.status_code == 200 and r.json()["timezone"] == "UTC"
    r = await master.client.patch(f"{BASE}/nope", json={"enabled": False}, headers=H)
    assert r.status_code == 404


async def test_a_stale_payload_can_be_paused_but_not_resumed_or_run(master: InProcess) -> None:
    record = new_record(SCRAPE, "old", {"every_seconds": 60, "payload": {"uri": "x"}})
    await master.backend.schedules.put(record)
    r = await master.client.patch(f"{BASE}/old", json={"enabled": False}, headers=H)
    assert r.status_code == 200, r.text
    r = await master.client.patch(f"{BASE}/old", json={"enabled": True}, headers=H)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "payload", "url"]
    r = await master.client.post(f"{BASE}/old/run", headers=H)
    assert r.status_code == 409 and "payload.url" in r.json()["detail"]
    r = await master.client.patch(
        f"{BASE}/old", json={"enabled": True, "payload": {"url": "x"}}, headers=H
    )
    assert r.status_code == 200 and r.json()["enabled"] is True


async def test_run_now_enqueues_one_task(master: InProcess) -> None:
    s = await create(master, id="r", every_seconds=3600, enabled=False, priority=1, group="g")
    r = await master.client.post(f"{BASE}/r/run", headers=H)
    assert r.status_code == 202, r.text
    task_id = r.json()["task_id"]
    assert task_id.startswith("schedule:r:run:")
    assert (await master.backend.queues.depths(SCRAPE)).pending == 1
    assert (await master.backend.queues.state(SCRAPE, task_id)).state == "queued"
    (task,) = await master.backend.queues.reserve(SCRAPE, k=1)
    assert (task.body.id, task.body.payload, task.body.group) == (
        task_id,
        {"url": "https://example.com/"},
        "g",
    )
    after = (await master.client.get(f"{BASE}/r", headers=H)).json()
    assert after["last_task_id"] == task_id and after["last_run"] is not None
    assert after["next_run"] == s["next_run"] and after["enabled"] is False
    second = (await master.client.post(f"{BASE}/r/run", headers=H)).json()["task_id"]
    assert second != task_id
    assert (await master.client.post(f"{BASE}/missing/run", headers=H)).status_code == 404


async def test_delete(master: InProcess) -> None:
    await create(master, id="d", every_seconds=5)
    r = await master.client.delete(f"{BASE}/d", headers=H)
    assert r.status_code == 200 and r.json() == {"deleted": True}
    assert (await master.client.get(f"{BASE}/d", headers=H)).status_code == 404
    assert (await master.client.delete(f"{BASE}/d", headers=H)).status_code == 404
    assert await due_ids(master) == []
    await create(master, id="d", cron="0 0 * * *")  # the id is free again


async def test_unknown_or_queueless_types(master: InProcess) -> None:
    for path in ["/api/v1/automations/nope/schedules", f"/api/v1/automations/{LOOP}/schedules"]:
        body = {"id": "x", "every_seconds": 5, "payload": {}}
        assert (await master.client.post(path, json=body, headers=H)).status_code in (404, 409)
        assert (await master.client.get(f"{path}/x", headers=H)).status_code in (404, 409)
    # a continuous type lists its (no) schedules, saying why it has none
    r = await master.client.get(f"/api/v1/automations/{LOOP}/schedules", headers=H)
    assert r.status_code == 200 and r.json()["schedules"] == [] and r.json()["note"]
    r = await master.client.get("/api/v1/automations/nope/schedules", headers=H)
    assert r.status_code == 404


async def test_scopes(master: InProcess) -> None:
    await create(master, id="s", every_seconds=60)
    for token in (READ, SCOPED):
        assert (await master.client.get(BASE, headers=auth(token))).status_code == 200
        assert (await master.client.get(f"{BASE}/s", headers=auth(token))).status_code == 200
        body = {"id": "t", "every_seconds": 5, "payload": {"url": "u"}}
        r = await master.client.post(BASE, json=body, headers=auth(token))
        assert r.status_code == 403
        r = await master.client.patch(f"{BASE}/s", json={"enabled": False}, headers=auth(token))
        assert r.status_code == 403
        assert (await master.client.post(f"{BASE}/s/run", headers=auth(token))).status_code == 403
        assert (await master.client.delete(f"{BASE}/s", headers=auth(token))).status_code == 403
    assert (await master.client.get(BASE, headers=auth(OTHER_SCOPED))).status_code == 403
    assert (await master.client.get(BASE)).status_code == 401
    assert (await master.client.get(f"{BASE}/s", headers=H)).json()["enabled"] is True


async def test_an_unreadable_record_is_listed_and_can_be_deleted(master: InProcess) -> None:
    await create(master, id="fine", every_seconds=60)
    raw = json.dumps({"id": "broken", "cron": "not cron", "next_run": 1})
    await master.backend.schedules.put_raw(SCRAPE, "broken", raw, None)
    await master.backend.schedules.put_raw(SCRAPE, "junk", "{not json", 5.0)
    r = await master.client.get(BASE, headers=H)
    assert r.status_code == 200, r.text
    listed = {s["id"]: s for s in r.json()["schedules"]}
    assert listed["broken"]["unreadable"] is True and listed["broken"]["raw"] == raw
    assert "cron" in listed["broken"]["error"]
    assert listed["junk"]["unreadable"] is True and listed["junk"]["raw"] == "{not json"
    assert listed["fine"]["every_seconds"] == 60
    for sid in ("broken", "junk"):
        r = await master.client.get(f"{BASE}/{sid}", headers=H)
        assert r.status_code == 409 and "cannot be read" in r.json()["detail"]
        r = await master.client.patch(f"{BASE}/{sid}", json={"enabled": False}, headers=H)
        assert r.status_code == 409
        assert (await master.client.post(f"{BASE}/{sid}/run", headers=H)).status_code == 409
        body = {"id": sid, "every_seconds": 5, "payload": {"url": "u"}}
        assert (await master.client.post(BASE, json=body, headers=H)).status_code == 409
        r = await master.client.delete(f"{BASE}/{sid}", headers=H)
        assert r.status_code == 200
    assert [s["id"] for s in (await master.client.get(BASE, headers=H)).json()["schedules"]] == [
        "fine"
    ]
    assert (await master.backend.queues.depths(SCRAPE)).pending == 0


async def test_a_declared_schedule_is_marked(master: InProcess) -> None:
    record = new_record(
        SCRAPE, "decl", {"every_seconds": 60, "payload": {"url": "u"}}, declared="abc123"
    )
    await master.backend.schedules.put(record)
    s = (await master.client.get(f"{BASE}/decl", headers=H)).json()
    assert s["declared"] is True
    r = await master.client.patch(f"{BASE}/decl", json={"enabled": False}, headers=H)
    assert r.json()["declared"] is True
    stored = await master.backend.schedules.get(SCRAPE, "decl")
    assert stored.declared == "abc123" and not stored.enabled
