"""Catalog schemas' regular expressions run on RE2: a planted catastrophic pattern
cannot stall the master's event loop."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tests.master.conftest import ADMIN, InProcess, auth

GHOST = "ghost-regex"


def entry(props: dict[str, Any], **schema: Any) -> dict[str, Any]:
    payload = {"type": "object", "properties": props, **schema}
    return {"type": GHOST, "kind": "BatchAutomation", "config": {},
            "queue": {"name": GHOST, "payload": payload}, "stream": None, "pools": {}}  # fmt: skip


async def longest_block_during(coro: Any) -> tuple[Any, float]:
    """Run ``coro`` while a ticker measures the event loop's longest stall."""
    worst = 0.0
    done = False

    async def ticker() -> None:
        nonlocal worst
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            worst = max(worst, now - last - 0.005)
            last = now

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0.02)
    try:
        result = await coro
    finally:
        done = True
        await tick
    return result, worst


async def test_a_catastrophic_pattern_is_matched_in_linear_time(master: InProcess) -> None:
    await master.backend.catalog.put(GHOST, entry({"s": {"type": "string", "pattern": "^(a+)+$"}}))
    path = f"/api/v1/automations/{GHOST}/tasks"
    r, worst = await longest_block_during(
        master.client.post(path, json={"payload": {"s": "a" * 40 + "!"}}, headers=auth(ADMIN))
    )
    print(f"\nlongest event-loop block during the hostile validation: {worst * 1000:.1f} ms")
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "payload", "s"]
    assert worst < 0.1
    r = await master.client.post(path, json={"payload": {"s": "aaaa"}}, headers=auth(ADMIN))
    assert r.status_code == 202


async def test_pattern_properties_and_patterns_re2_cannot_compile(master: InProcess) -> None:
    await master.backend.catalog.put(
        GHOST,
        entry(
            {"b": {"type": "string", "pattern": "^(x)\\1$"}},  # a back-reference
            patternProperties={"^(a|aa)+$": {"type": "integer"}},
        ),
    )
    path = f"/api/v1/automations/{GHOST}/tasks"
    r = await master.client.post(
        path, json={"payload": {"a" * 30: "not an int"}}, headers=auth(ADMIN)
    )
    assert r.status_code == 422
    # Not checked by the master (the worker's own model still validates it).
    r = await master.client.post(path, json={"payload": {"b": "zz"}}, headers=auth(ADMIN))
    assert r.status_code == 202
