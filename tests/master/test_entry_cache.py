"""The submit routes reuse a type's catalog entry for a short time, and no longer."""

from __future__ import annotations

from typing import Any

from fleet.master.services.entry_cache import EntryCache
from tests.master.conftest import ADMIN, InProcess, auth

H = auth(ADMIN)
GHOST = "cached-ghost"  # catalogued only: validated from its JSON schema
TASKS = f"/api/v1/automations/{GHOST}/tasks"


def entry(payload_schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": GHOST,
        "kind": "BatchAutomation",
        "config": {},
        "queue": {"name": GHOST, "payload": payload_schema},
        "stream": None,
        "pools": {},
    }


WANTS_INT = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
WANTS_STR = {"type": "object", "properties": {"n": {"type": "string"}}, "required": ["n"]}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_entry_is_reused_until_its_time_is_up(master: InProcess) -> None:
    clock = Clock()
    master.app.state.fleet.entries = EntryCache(ttl=1.0, clock=clock)
    await master.backend.catalog.put(GHOST, entry(WANTS_INT))
    r = await master.client.post(TASKS, json={"payload": {"n": 1}}, headers=H)
    assert r.status_code == 202
    # A worker re-publishes the type with another payload schema.
    await master.backend.catalog.put(GHOST, entry(WANTS_STR))
    clock.now += 0.9
    r = await master.client.post(TASKS, json={"payload": {"n": 2}}, headers=H)
    assert r.status_code == 202  # still the entry fetched 0.9 s ago
    clock.now += 0.2
    r = await master.client.post(TASKS, json={"payload": {"n": 3}}, headers=H)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "payload", "n"]
    r = await master.client.post(TASKS, json={"payload": {"n": "three"}}, headers=H)
    assert r.status_code == 202


async def test_unknown_types_are_not_cached_and_a_delete_is_seen_at_once(
    master: InProcess,
) -> None:
    master.app.state.fleet.entries = EntryCache(ttl=3600.0)
    r = await master.client.post(TASKS, json={"payload": {"n": 1}}, headers=H)
    assert r.status_code == 404
    await master.backend.catalog.put(GHOST, entry(WANTS_INT))
    r = await master.client.post(
        f"{TASKS}/batch", json={"tasks": [{"payload": {"n": 1}}]}, headers=H
    )
    assert r.status_code == 202 and r.json()["results"][0]["queued"] is True
    r = await master.client.delete(f"/api/v1/automations/{GHOST}", headers=H)
    assert r.status_code == 200
    r = await master.client.post(TASKS, json={"payload": {"n": 1}}, headers=H)
    assert r.status_code == 404
