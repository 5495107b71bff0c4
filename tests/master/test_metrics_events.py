"""``/metrics`` content and the SSE stream (over real HTTP)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest

from fleet.backends import open_backend
from fleet.core.metrics import Metrics
from fleet.core.records import PushRequest, TaskBody
from fleet.master.services.event_hub import format_event, topic_event
from tests.master.conftest import ADMIN, InProcess, auth, settings_for, start_in_process
from tests.master.plugins import LOOP, SCRAPE

H = auth(ADMIN)


async def test_metrics_exports_queues_workers_and_plugin_metrics(master: InProcess) -> None:
    b = master.backend
    await b.queues.push(
        SCRAPE, [PushRequest(body=TaskBody(id=f"t{i}", payload={})) for i in range(3)]
    )
    await b.queues.reserve(SCRAPE, k=1)
    await b.workers.register(SCRAPE, "w1", {"host": "h"})
    await b.workers.set_state(SCRAPE, "w1", {"state": "RUNNING", "last_seen": str(time.time())})
    m = Metrics()
    m.incr("pages_fetched", 4)
    m.set("lag", 1.5)
    m.observe("fetch_seconds", 0.3)
    duration = Metrics()
    duration.observe("d", 0.02)
    await b.workers.put_stats(
        SCRAPE,
        "w1",
        {
            "ts": time.time(),
            "slots": {"busy": 1, "total": 2},
            "tasks": {"per_second": 2.5},
            "cpu_percent": 12.0,
            "rss_bytes": 1000,
            "metrics": m.snapshot(),
            "task_duration": duration.snapshot()["histograms"]["d"],
        },
    )
    await b.workers.register(LOOP, "gone", {})
    await b.workers.set_state(LOOP, "gone", {"state": "RUNNING", "last_seen": "1"})
    r = await master.client.get("/metrics", headers=auth("read-secret-token"))
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    text = r.text
    for line in (
        'fleet_tasks_submitted_total{type="m-scrape"} 3.0',
        'fleet_queue_depth{state="normal",type="m-scrape"} 2.0',
        'fleet_queue_depth{state="processing",type="m-scrape"} 1.0',
        'fleet_workers{state="RUNNING",type="m-scrape"} 1.0',
        'fleet_workers{state="DOWN",type="m-loop"} 1.0',
        'fleet_slots_busy{type="m-scrape"} 1.0',
        'fleet_tasks_per_second{type="m-scrape"} 2.5',
        'fleet_worker_rss_bytes{type="m-scrape",worker="w1"} 1000.0',
        'fleet_plugin_counter_total{name="pages_fetched",type="m-scrape"} 4.0',
        'fleet_plugin_gauge{name="lag",type="m-scrape"} 1.5',
        'fleet_plugin_histogram_bucket{le="0.5",name="fetch_seconds",type="m-scrape"} 1.0',
        'fleet_task_duration_seconds_count{type="m-scrape"} 1.0',
        "fleet_backend_up 1.0",
    ):
        assert line in text, line
    assert "fleet_queue_oldest_pending_age_seconds" in text


async def test_metrics_public_flag(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    inproc, life = await start_in_process(settings_for(url, metrics_public=True), sweeper=False)
    try:
        assert (await inproc.client.get("/metrics")).status_code == 200
    finally:
        await inproc.client.aclose()
        await life.__aexit__(None, None, None)


class EventReader:
    """Reads SSE frames of one streaming response."""

    def __init__(self, response: httpx.Response) -> None:
        self.lines = response.aiter_lines()

    async def next(self, want: str, timeout: float = 10) -> dict[str, Any]:
        """Skip frames until one named ``want``; returns its data."""

        async def scan() -> dict[str, Any]:
            name = None
            async for line in self.lines:
                if line.startswith("event: "):
                    name = line[len("event: ") :]
                elif line.startswith("data: ") and name == want:
                    data: dict[str, Any] = json.loads(line[len("data: ") :])
                    return data
            raise AssertionError("stream ended")

        return await asyncio.wait_for(scan(), timeout)


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
async def test_sse_delivers_emits_config_and_depths(
    live_factory: Any, sqlite_url: str, request: pytest.FixtureRequest, kind: str
) -> None:
    url = sqlite_url if kind == "sqlite" else request.getfixturevalue("redis_url")
    live = live_factory(url, sweeper=False)
    worker_side = await open_backend(url)
    try:
        async with (
            httpx.AsyncClient(base_url=live.url, headers=H, timeout=30) as client,
            client.stream("GET", "/api/v1/events?interval=0.3") as response,
        ):
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            events = EventReader(response)
            hello = await events.next("hello")
            assert SCRAPE in hello["types"]
            await worker_side.streams.push(LOOP, {"text": "hi"}, worker_id="w9")
            emit = await events.next("emit")
            assert emit["type"] == LOOP and emit["data"]["payload"] == {"text": "hi"}
            r = await client.patch(f"/api/v1/automations/{SCRAPE}/config", json={"slots": 2})
            config = await events.next("config")
            assert config == {"type": SCRAPE, "data": {"worker_id": None, "gen": r.json()["gen"]}}
            await worker_side.queues.push(
                SCRAPE, [PushRequest(body=TaskBody(id="q1", payload={"url": "u"}))]
            )
            depths = await events.next("depths")
            deadline = time.monotonic() + 20
            while depths[SCRAPE]["pending_total"] != 1 and time.monotonic() < deadline:
                depths = await events.next("depths")
            assert depths[SCRAPE]["pending_total"] == 1
            await worker_side.workers.register(SCRAPE, "w-sse", {"host": "h"})
            await worker_side.workers.set_state(
                SCRAPE, "w-sse", {"state": "RUNNING", "last_seen": str(time.time())}
            )
            workers = await events.next("workers")
            # A tick may fall between the registration and the first state write.
            while not (workers and workers[0]["up"]):
                workers = await events.next("workers")
            assert workers[0]["worker_id"] == "w-sse" and workers[0]["state"] == "RUNNING"
    finally:
        await worker_side.close()


def test_topic_event_maps_backend_topics() -> None:
    types = {"a", "a.b"}
    assert topic_event("a.emit", types) == ("emit", "a")
    assert topic_event("a.b.emit", types) == ("emit", "a.b")
    assert topic_event("config.a", types) == ("config", "a")
    assert topic_event("worker.a.b", types) == ("worker", "a.b")
    assert topic_event("config.zzz", types) is None
    assert format_event("x", {"k": 1}) == b'event: x\ndata: {"k":1}\n\n'


async def test_metrics_export_identity_pools(master: InProcess) -> None:
    from fleet.core.identities import parse_identity

    ids = master.backend.identities
    await ids.put("m-pool", [parse_identity({"id": f"i{n}"}) for n in range(4)])
    held = await ids.lease("m-pool")
    blocked = await ids.lease("m-pool")
    assert held is not None and blocked is not None
    await ids.release(
        "m-pool",
        blocked.identity.id,
        blocked.token,
        outcome="blocked",
        reason="x",
        cooldown_seconds=60,
    )
    await ids.retire("m-pool", "i3")
    r = await master.client.get("/metrics", headers=auth("read-secret-token"))
    assert r.status_code == 200, r.text
    lines = r.text.splitlines()
    for state, n in (("ready", 1), ("leased", 1), ("cooling", 1), ("retired", 1)):
        assert f'fleet_identities{{pool="m-pool",state="{state}"}} {n}.0' in lines, r.text
    assert 'fleet_identity_blocks{pool="m-pool"} 1.0' in lines
