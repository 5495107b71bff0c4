"""DLQ, cancel, output, config with generations, workers, pools, delete type.

Workers are simulated through the backend API the real worker uses (register,
state, stats), never by mocking the master's own parts.
"""

from __future__ import annotations

import time
from typing import Any

from fleet.core.records import PushRequest, TaskBody
from tests.master.conftest import ADMIN, READ, SCOPED, InProcess, auth
from tests.master.plugins import LOOP, SCRAPE

H = auth(ADMIN)
A = f"/api/v1/automations/{SCRAPE}"


async def register_worker(
    backend: Any, wid: str, automation_type: str = SCRAPE, **state: str
) -> None:
    await backend.workers.register(automation_type, wid, {"host": "h1", "pid": 42})
    fields = {"state": "RUNNING", "last_seen": str(time.time()), "applied_gen": "0", "slots": "2"}
    fields.update(state)
    await backend.workers.set_state(automation_type, wid, fields)


async def dead_task(backend: Any, task_id: str, priority: int = 0) -> None:
    body = TaskBody(id=task_id, payload={"url": task_id}, priority=priority, max_attempts=1)
    await backend.queues.push(SCRAPE, [PushRequest(body=body)])
    (res,) = await backend.queues.reserve(SCRAPE, k=1)
    assert (
        await backend.queues.nack(SCRAPE, res.body.id, res.token, delay_seconds=0, error="boom")
        == "dead"
    )


async def test_dlq_peek_replay_and_drain(master: InProcess) -> None:
    b = master.backend
    for i, prio in enumerate((5, 0, 0)):
        await dead_task(b, f"t{i}", prio)
    r = await master.client.get(f"{A}/dead?n=2", headers=auth(READ))
    assert r.status_code == 200
    dead = r.json()
    assert [d["id"] for d in dead] == ["t0", "t1"]
    assert dead[0]["last_error"] == "boom" and dead[0]["attempt"] == 1
    r = await master.client.post(f"{A}/dead/replay", json={"task_ids": []}, headers=H)
    assert r.json() == {"replayed": 0}
    assert (await b.queues.depths(SCRAPE)).dead == 3
    r = await master.client.post(f"{A}/dead/replay", json={"task_ids": ["t0"]}, headers=H)
    assert r.json() == {"replayed": 1}
    depths = await b.queues.depths(SCRAPE)
    assert depths.high == 1 and depths.dead == 2  # priority kept
    info = (await master.client.get(f"{A}/tasks/t0", headers=H)).json()
    assert info["state"] == "queued" and info["attempt"] == 0
    r = await master.client.post(f"{A}/dead/replay", json={"n": 1}, headers=H)
    assert r.json() == {"replayed": 1}
    r = await master.client.delete(f"{A}/dead", headers=H)
    assert r.json() == {"drained": 1}
    assert (await b.queues.depths(SCRAPE)).dead == 0
    r = await master.client.post(f"{A}/dead/replay", headers=H)  # no body: all (none left)
    assert r.json() == {"replayed": 0}


async def test_cancel_queued_and_processing_tasks(master: InProcess) -> None:
    b = master.backend
    ids = []
    for url in ("a", "b"):
        r = await master.client.post(f"{A}/tasks", json={"payload": {"url": url}}, headers=H)
        ids.append(r.json()["task_id"])
    (res,) = await b.queues.reserve(SCRAPE, k=1)
    async with await b.events.subscribe(f"cancel.{SCRAPE}") as sub:
        r = await master.client.delete(f"{A}/tasks/{res.body.id}", headers=H)
        assert r.json()["outcome"] == "cancelling"
        topic, message = await sub.__anext__()
        assert topic == f"cancel.{SCRAPE}" and message == {"task_id": res.body.id}
    other = ids[1] if res.body.id == ids[0] else ids[0]
    r = await master.client.delete(f"{A}/tasks/{other}", headers=H)
    assert r.json()["outcome"] == "cancelled"
    r = await master.client.delete(f"{A}/tasks/{other}", headers=H)
    assert r.status_code == 404
    r = await master.client.delete(f"{A}/tasks/{other}", headers=auth(READ))
    assert r.status_code == 403


async def test_output_peek_and_pop(master: InProcess) -> None:
    b = master.backend
    for i in range(3):
        await b.streams.push(LOOP, {"text": f"l{i}"}, worker_id="w1")
    path = f"/api/v1/automations/{LOOP}/output"
    r = await master.client.get(f"{path}?n=2", headers=auth(READ))
    assert [e["payload"]["text"] for e in r.json()] == ["l0", "l1"]
    r = await master.client.post(f"{path}/pop", json={"n": 2}, headers=H)
    assert [e["payload"]["text"] for e in r.json()] == ["l0", "l1"]
    assert await b.streams.length(LOOP) == 1
    r = await master.client.post(f"{path}/pop", json={"n": 0}, headers=H)
    assert r.status_code == 422


async def test_config_patch_bumps_generations_and_keeps_overrides(master: InProcess) -> None:
    b = master.backend
    await register_worker(b, "w1")
    await register_worker(b, "w2")
    r = await master.client.patch(f"{A}/workers/w2/config", json={"slots": 7}, headers=H)
    assert r.status_code == 200
    gen_w2 = r.json()["gen"]
    assert r.json()["workers"] == ["w2"]
    async with await b.events.subscribe(f"config.{SCRAPE}") as sub:
        r = await master.client.patch(
            f"{A}/config", json={"slots": 3, "user_agent": "ua"}, headers=H
        )
        assert r.status_code == 200
        body = r.json()
        assert body["gen"] > gen_w2 and sorted(body["workers"]) == ["w1", "w2"]
        _topic, message = await sub.__anext__()
        assert message == {"worker_id": None, "gen": body["gen"]}
    # One write for the type; each worker merges and writes its own desired config.
    book = await b.configs.book(SCRAPE, ["w1", "w2"])
    assert book.gen("w1") == book.gen("w2") == body["gen"]
    assert book.merged("w1") == {"slots": 3, "user_agent": "ua"}
    assert book.merged("w2") == {"slots": 7, "user_agent": "ua"}  # the override survives
    assert await b.configs.desired(SCRAPE, "w1") == (None, 0)  # only the worker writes it
    r = await master.client.get(f"{A}/workers/w2", headers=H)
    assert r.json()["config"]["desired"] == {"slots": 7, "user_agent": "ua"}
    assert r.json()["config"]["desired_gen"] == body["gen"]
    r = await master.client.get(f"{A}/config", headers=H)
    assert r.json()["config"] == {"slots": 3, "user_agent": "ua"}
    assert r.json()["effective"]["request_timeout_seconds"] == 10.0
    # The list shows desired vs applied generations and the lag.
    r = await master.client.get(f"{A}/workers", headers=H)
    views = {v["worker_id"]: v for v in r.json()}
    assert views["w1"]["gen"] == {"desired": body["gen"], "applied": 0}
    assert views["w1"]["lagging"] is True and views["w1"]["up"] is True
    await b.workers.set_state(SCRAPE, "w1", {"applied_gen": str(body["gen"])})
    r = await master.client.get(f"{A}/workers/w1", headers=H)
    one = r.json()
    assert one["lagging"] is False
    assert one["config"]["merged"] == {"slots": 3, "user_agent": "ua"}
    assert one["config"]["desired_gen"] == body["gen"]


async def test_invalid_config_is_422_and_nothing_changes(master: InProcess) -> None:
    b = master.backend
    await register_worker(b, "w1")
    for patch, loc in (
        ({"slots": -1}, ["body", "slots"]),
        ({"slotz": 1}, ["body", "slotz"]),
        ({"request_timeout_seconds": "x"}, ["body", "request_timeout_seconds"]),
    ):
        r = await master.client.patch(f"{A}/config", json=patch, headers=H)
        assert r.status_code == 422, patch
        assert r.json()["detail"][0]["loc"] == loc
    r = await master.client.patch(f"{A}/workers/w1/config", json={"max_attempts": 0}, headers=H)
    assert r.status_code == 422
    assert await b.configs.get(SCRAPE) == {}
    assert await b.configs.desired(SCRAPE, "w1") == (None, 0)


async def test_required_plugin_fields_are_reported_missing(master: InProcess) -> None:
    path = f"/api/v1/automations/{LOOP}"
    r = await master.client.patch(f"{path}/config", json={"slots": 2}, headers=H)
    assert r.status_code == 200 and r.json()["missing"] == ["api_key"]
    r = await master.client.patch(f"{path}/config", json={"api_key": "k"}, headers=H)
    assert r.json()["missing"] == []
    # Shown masked (a key naming a secret), stored as sent.
    assert r.json()["config"] == {"slots": 2, "api_key": "********"}
    assert await master.backend.configs.get(LOOP) == {"slots": 2, "api_key": "k"}
    r = await master.client.patch(f"{path}/config?replace=true", json={"slots": 1}, headers=H)
    assert r.json()["config"] == {"slots": 1}


async def test_drain_resume_and_forget(master: InProcess) -> None:
    b = master.backend
    await register_worker(b, "w1")
    async with await b.events.subscribe(f"control.{SCRAPE}") as sub:
        r = await master.client.post(f"{A}/workers/w1/drain", headers=H)
        assert r.status_code == 200
        assert (await sub.__anext__())[1] == {"worker_id": "w1", "action": "drain"}
        assert await b.kv.get("fleet-control", f"drain:{SCRAPE}:w1") == "true"
        r = await master.client.post(f"{A}/workers/w1/resume", headers=H)
        assert (await sub.__anext__())[1] == {"worker_id": "w1", "action": "resume"}
    assert await b.kv.get("fleet-control", f"drain:{SCRAPE}:w1") is None
    r = await master.client.post(f"{A}/workers/ghost/drain", headers=H)
    assert r.status_code == 404
    r = await master.client.delete(f"{A}/workers/w1", headers=H)
    assert r.json()["forgotten"] is True
    assert await b.workers.ids(SCRAPE) == []
    r = await master.client.get(f"{A}/workers/w1", headers=H)
    assert r.status_code == 404


async def test_worker_down_when_heartbeats_stop(master: InProcess) -> None:
    b = master.backend
    await register_worker(b, "old", last_seen=str(time.time() - 60))
    await register_worker(b, "new")
    r = await master.client.get("/api/v1/workers", headers=auth(READ))
    views = {v["worker_id"]: v for v in r.json()}
    assert views["old"]["up"] is False and views["old"]["state"] == "DOWN"
    assert views["new"]["up"] is True and views["new"]["state"] == "RUNNING"
    assert views["new"]["hardware"]["host"] == "h1"


async def test_pools_payload_only_for_admin_and_drop(master: InProcess) -> None:
    b = master.backend
    await b.pools.put("cookies", {"secret": "s"}, {"site": "a"})
    await b.pools.put("cookies", {"secret": "t"}, {"site": "b"})
    r = await master.client.get("/api/v1/pools", headers=auth(READ))
    # (by name: pools that automations registered in this process declare are listed too)
    assert {p["name"]: p for p in r.json()}["cookies"]["total"] == 2
    r = await master.client.get("/api/v1/pools/cookies?n=1", headers=auth(READ))
    assert len(r.json()["items"]) == 1 and "payload" not in r.json()["items"][0]
    assert "secret" not in r.text
    r = await master.client.get("/api/v1/pools/cookies", headers=H)
    assert {i["payload"]["secret"] for i in r.json()["items"]} == {"s", "t"}
    assert (await master.client.get("/api/v1/pools/none", headers=H)).status_code == 404
    r = await master.client.delete("/api/v1/pools/cookies", headers=H)
    assert r.json() == {"dropped": 2}
    assert await b.pools.names() == []


async def test_delete_type_removes_its_state(master: InProcess) -> None:
    b = master.backend
    await register_worker(b, "w1")
    await master.client.post(f"{A}/workers/w1/drain", headers=H)
    await master.client.post(f"{A}/tasks", json={"payload": {"url": "u"}}, headers=H)
    r = await master.client.delete(A, headers=H)
    assert await b.kv.get("fleet-control", f"drain:{SCRAPE}:w1") is None
    assert r.json() == {"deleted": SCRAPE}
    assert await b.catalog.get(SCRAPE) is None
    assert (await b.queues.depths(SCRAPE)).pending == 0
    assert await b.workers.ids(SCRAPE) == []
    r = await master.client.get(f"{A}/queue", headers=H)
    assert r.status_code == 404


async def test_automations_summary(master: InProcess) -> None:
    await register_worker(master.backend, "w1")
    await register_worker(master.backend, "x1", automation_type="uncatalogued")
    r = await master.client.get("/api/v1/automations", headers=auth(READ))
    by_type = {a["type"]: a for a in r.json()}
    assert by_type[SCRAPE]["workers"]["up"] == 1
    assert by_type[SCRAPE]["queue"]["pending_total"] == 0
    assert by_type[LOOP]["queue"] is None
    assert by_type["uncatalogued"]["catalogued"] is False


async def test_names_with_glob_characters_are_refused(master: InProcess) -> None:
    b = master.backend
    await master.client.post(f"{A}/tasks", json={"payload": {"url": "u"}}, headers=H)
    for path in ("/api/v1/automations/%2A", "/api/v1/automations/m-%3F", "/api/v1/pools/%2A"):
        r = await master.client.delete(path, headers=H)
        assert r.status_code == 422, path
    assert (await b.queues.depths(SCRAPE)).pending == 1
    r = await master.client.get("/api/v1/automations/..bad/queue", headers=H)
    assert r.status_code == 422


async def test_override_for_a_worker_not_registered_yet_is_kept(master: InProcess) -> None:
    b = master.backend
    r = await master.client.patch(f"{A}/workers/later/config", json={"slots": 9}, headers=H)
    assert r.status_code == 200
    assert r.json()["gen"] == 0 and r.json()["workers"] == []
    assert await b.configs.get(SCRAPE, "later") == {"slots": 9}
    assert await b.configs.desired(SCRAPE, "later") == (None, 0)
    # A later type-wide PATCH keeps it for when the worker registers.
    await register_worker(b, "later")
    r = await master.client.patch(f"{A}/config", json={"user_agent": "x"}, headers=H)
    book = await b.configs.book(SCRAPE, ["later"])
    assert book.merged("later") == {"user_agent": "x", "slots": 9}
    assert book.gen("later") == r.json()["gen"]


async def test_scoped_token_sees_only_its_types(master: InProcess) -> None:
    b = master.backend
    await register_worker(b, "w1")
    await register_worker(b, "w2", automation_type=LOOP)
    r = await master.client.get("/api/v1/workers", headers=auth(SCOPED))
    assert [v["worker_id"] for v in r.json()] == ["w1"]
    r = await master.client.get("/api/v1/automations", headers=auth(SCOPED))
    assert [a["type"] for a in r.json()] == [SCRAPE]
    r = await master.client.get(f"/api/v1/automations/{LOOP}/workers", headers=auth(SCOPED))
    assert r.status_code == 403


async def test_delete_type_refuses_while_a_running_run_holds_its_tasks(
    master: InProcess,
) -> None:
    b = master.backend
    r = await master.client.post("/api/v1/runs", json={"name": "crawl"}, headers=H)
    run = r.json()["run_id"]
    r = await master.client.post(
        f"{A}/tasks", json={"payload": {"url": "u"}, "run": run}, headers=H
    )
    assert r.status_code in (200, 201, 202), r.text
    r = await master.client.delete(A, headers=H)
    assert r.status_code == 409 and run in r.json()["detail"], r.text
    assert (await b.queues.depths(SCRAPE)).pending == 1  # nothing purged
    assert (await master.client.delete(f"/api/v1/runs/{run}", headers=H)).status_code == 200
    r = await master.client.delete(A, headers=H)
    assert r.status_code == 200 and r.json() == {"deleted": SCRAPE}
    record = await b.runs.get(run)
    assert record is not None and record.state == "cancelled"
