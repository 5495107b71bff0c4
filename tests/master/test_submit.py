"""Submitting tasks: validation (422 with the field), 404, 409, batch, 413, bad JSON."""

from __future__ import annotations

import json

from tests.master.conftest import ADMIN, InProcess, auth
from tests.master.plugins import LOOP, SCRAPE, Page

H = auth(ADMIN)
TASKS = f"/api/v1/automations/{SCRAPE}/tasks"
GHOST = "ghost-scrape"  # catalogued by a "worker", its plugin is not in this process


async def test_submit_queues_and_state_is_visible(master: InProcess) -> None:
    r = await master.client.post(TASKS, json={"payload": {"url": "u"}, "priority": 3}, headers=H)
    assert r.status_code == 202
    body = r.json()
    assert body["queued"] is True and body["duplicate"] is False
    r = await master.client.get(f"{TASKS}/{body['task_id']}", headers=H)
    assert r.status_code == 200 and r.json()["state"] == "queued"
    assert r.json()["priority"] == 3
    r = await master.client.get(f"/api/v1/automations/{SCRAPE}/queue", headers=H)
    assert r.json()["pending"]["high"] == 1


async def test_invalid_payload_is_422_pointing_at_the_field(master: InProcess) -> None:
    r = await master.client.post(TASKS, json={"payload": {"url": "u", "depth": 99}}, headers=H)
    assert r.status_code == 422
    assert [e["loc"] for e in r.json()["detail"]] == [["body", "payload", "depth"]]
    r = await master.client.post(TASKS, json={"payload": {}}, headers=H)
    assert r.json()["detail"][0]["loc"] == ["body", "payload", "url"]
    depths = await master.backend.queues.depths(SCRAPE)
    assert depths.pending == 0


async def test_type_without_local_plugin_is_validated_from_the_catalog(master: InProcess) -> None:
    entry = {
        "type": GHOST,
        "kind": "BatchAutomation",
        "config": {},
        "queue": {"name": GHOST, "payload": Page.model_json_schema()},
        "stream": None,
        "pools": {},
    }
    await master.backend.catalog.put(GHOST, entry)
    path = f"/api/v1/automations/{GHOST}/tasks"
    r = await master.client.post(path, json={"payload": {"url": 7}}, headers=H)
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "payload", "url"]
    r = await master.client.post(path, json={"payload": {"url": "ok"}}, headers=H)
    assert r.status_code == 202


async def test_unknown_type_is_404_and_continuous_type_is_409(master: InProcess) -> None:
    r = await master.client.post("/api/v1/automations/nope/tasks", json={"payload": {}}, headers=H)
    assert r.status_code == 404 and "nope" in r.json()["detail"]
    r = await master.client.post(
        f"/api/v1/automations/{LOOP}/tasks", json={"payload": {}}, headers=H
    )
    assert r.status_code == 409 and "no task queue" in r.json()["detail"]


async def test_bad_options_and_unknown_keys_are_422(master: InProcess) -> None:
    cases = [
        ({"payload": {"url": "u"}, "max_attempts": 0}, ["body", "max_attempts"]),
        ({"payload": {"url": "u"}, "ttl_seconds": -1}, ["body", "ttl_seconds"]),
        ({"payload": {"url": "u"}, "task_id": ""}, ["body", "task_id"]),
        ({"payload": {"url": "u"}, "priorty": 1}, ["body", "priorty"]),
        ({"url": "u"}, ["body", "payload"]),
    ]
    for body, loc in cases:
        r = await master.client.post(TASKS, json=body, headers=H)
        assert r.status_code == 422, body
        assert loc in [e["loc"] for e in r.json()["detail"]], r.text


async def test_malformed_json_and_non_finite_numbers_are_422_not_500(master: InProcess) -> None:
    headers = {**H, "Content-Type": "application/json"}
    for raw in (b"{", b"not json", b"[]", b'{"payload": {"url": "u", "depth": NaN}}'):
        r = await master.client.post(TASKS, content=raw, headers=headers)
        assert r.status_code == 422, (raw, r.text)
    r = await master.client.post(
        TASKS, content=b'{"payload": {"url": "u", "x": [Infinity]}}', headers=headers
    )
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"][:2] == ["body", "payload"]
    r = await master.client.post(
        TASKS, content=b'{"payload": {"url": "u"}, "priority": NaN}', headers=headers
    )
    assert r.status_code == 422


async def test_idempotent_submit_returns_the_first_task(master: InProcess) -> None:
    body = {"payload": {"url": "u"}, "idempotency_key": "k-1"}
    first = (await master.client.post(TASKS, json=body, headers=H)).json()
    second = (await master.client.post(TASKS, json=body, headers=H)).json()
    assert second == {"task_id": first["task_id"], "queued": False, "duplicate": True}
    assert (await master.backend.queues.depths(SCRAPE)).pending == 1


async def test_batch_mixed_valid_and_invalid(master: InProcess) -> None:
    tasks = [
        {"payload": {"url": "a"}},
        {"payload": {"url": "b", "depth": 42}},
        {"payload": {"url": "c"}, "task_id": "fixed-1"},
        "not an object",
        {"payload": {"url": "d"}, "task_id": "fixed-1"},
    ]
    r = await master.client.post(f"{TASKS}/batch", json={"tasks": tasks}, headers=H)
    assert r.status_code == 202
    results = r.json()["results"]
    assert len(results) == 5
    assert results[0]["queued"] is True
    assert "error" in results[1] and results[1]["detail"][0]["loc"] == [
        "body",
        "tasks",
        1,
        "payload",
        "depth",
    ]
    assert results[2] == {"task_id": "fixed-1", "queued": True, "duplicate": False}
    assert "error" in results[3]
    assert results[4]["duplicate"] is True
    assert (await master.backend.queues.depths(SCRAPE)).pending == 2


async def test_batch_of_10000_is_accepted_and_10001_refused(master: InProcess) -> None:
    tasks = [{"payload": {"url": f"u{i}"}} for i in range(10_000)]
    r = await master.client.post(f"{TASKS}/batch", json={"tasks": tasks}, headers=H)
    assert r.status_code == 202
    assert sum(1 for x in r.json()["results"] if x.get("queued")) == 10_000
    tasks.append({"payload": {"url": "one too many"}})
    r = await master.client.post(f"{TASKS}/batch", json={"tasks": tasks}, headers=H)
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "tasks"]


async def test_oversized_bodies_are_413(master: InProcess) -> None:
    big = json.dumps({"payload": {"url": "x" * (1 << 20)}}).encode()
    r = await master.client.post(
        TASKS, content=big, headers={**H, "Content-Type": "application/json"}
    )
    assert r.status_code == 413
    # A batch may be larger than 1 MiB (its limit is 32 MiB).
    tasks = [{"payload": {"url": "x" * 1000}} for _ in range(2000)]
    r = await master.client.post(f"{TASKS}/batch", json={"tasks": tasks}, headers=H)
    assert r.status_code == 202


async def test_body_without_content_length_is_counted_while_read(master: InProcess) -> None:
    async def chunks():  # type: ignore[no-untyped-def]
        yield b'{"payload": {"url": "'
        for _ in range(300):
            yield b"y" * 4096
        yield b'"}}'

    r = await master.client.post(
        TASKS, content=chunks(), headers={**H, "Content-Type": "application/json"}
    )
    assert "content-length" not in r.request.headers
    assert r.status_code == 413
