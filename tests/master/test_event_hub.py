"""Every event stream of a master shares one backend subscription and one poller
(fleet/master/services/event_hub.py), and each client still gets only what it follows."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from fleet.backends import open_backend
from fleet.backends.redis.keys import event_channel
from fleet.core.records import PushRequest, TaskBody
from fleet.master.services import event_hub
from fleet.master.services.event_hub import IDLE_TOPIC, EventHub
from tests.master.conftest import ADMIN, auth, memory_url, wait_for
from tests.support.redis_server import REDIS_BIN, RedisServer


class Frames:
    """Parsed frames of one hub stream."""

    def __init__(self, stream: AsyncIterator[bytes]) -> None:
        self.stream = stream

    async def next(self, want: str | None = None, timeout: float = 10.0) -> tuple[str, Any]:
        async def scan() -> tuple[str, Any]:
            async for raw in self.stream:
                head, data = raw.decode().strip().split("\n")
                name = head.removeprefix("event: ")
                if want is None or name == want:
                    return name, json.loads(data.removeprefix("data: "))
            raise StopAsyncIteration

        return await asyncio.wait_for(scan(), timeout)

    async def rest(self, timeout: float = 10.0) -> list[str]:
        """Names of every frame until the stream ends."""

        async def drain() -> list[str]:
            return [
                raw.decode().split("\n")[0].removeprefix("event: ") async for raw in self.stream
            ]

        return await asyncio.wait_for(drain(), timeout)


async def test_clients_share_one_subscription_and_see_only_their_types() -> None:
    backend = await open_backend(memory_url())
    hub = EventHub(backend, heartbeat_seconds=5.0)
    await backend.catalog.put("hub-a", {"queue": {"type": "object"}})
    await backend.catalog.put("hub-b", {"queue": {"type": "object"}})
    await backend.queues.push("hub-a", [PushRequest(TaskBody(id="t1", payload={}))])
    every = Frames(hub.stream(0.2))
    only_b = Frames(hub.stream(0.2, {"hub-b"}))
    try:
        assert (await every.next("hello"))[1] == {"types": ["hub-a", "hub-b"]}
        assert (await only_b.next("hello"))[1] == {"types": ["hub-b"]}
        depths_all = (await every.next("depths"))[1]
        depths_b = (await only_b.next("depths"))[1]
        assert set(depths_all) == {"hub-a", "hub-b"} and depths_all["hub-a"]["pending_total"] == 1
        assert set(depths_b) == {"hub-b"}
        assert hub.clients == 2 and hub.subscriptions_opened == 1

        await backend.events.publish("hub-a.emit", {"n": 1})
        await backend.events.publish("hub-b.emit", {"n": 2})
        assert (await every.next("emit"))[1] == {"type": "hub-a", "data": {"n": 1}}
        assert (await every.next("emit"))[1] == {"type": "hub-b", "data": {"n": 2}}
        # only_b never sees hub-a's emit: its first emit is hub-b's
        assert (await only_b.next("emit"))[1] == {"type": "hub-b", "data": {"n": 2}}
    finally:
        await every.stream.aclose()  # type: ignore[attr-defined]
        await only_b.stream.aclose()  # type: ignore[attr-defined]
        await hub.close()
        await backend.close()


async def test_a_late_client_hears_hello_and_the_last_snapshot_at_once() -> None:
    backend = await open_backend(memory_url())
    hub = EventHub(backend, heartbeat_seconds=5.0)
    await backend.catalog.put("hub-late", {"queue": {"type": "object"}})
    first = Frames(hub.stream(0.2))
    try:
        await first.next("depths")
        # a long interval: without the shared snapshot it would wait 60 s for depths
        late = Frames(hub.stream(60.0))
        assert (await late.next(timeout=2))[0] == "hello"
        assert (await late.next(timeout=2))[0] == "depths"
        assert (await late.next(timeout=2))[0] == "workers"
        assert hub.subscriptions_opened == 1
        await late.stream.aclose()  # type: ignore[attr-defined]
    finally:
        await first.stream.aclose()  # type: ignore[attr-defined]
        await hub.close()
        await backend.close()


async def test_types_frames_carry_the_automations_rows_only_when_they_change() -> None:
    # A dashboard builds its type cards from frames: the rows of GET
    # /automations (without counts) come after depths and workers, once, and
    # again only when the list changed; a worker of an uncatalogued type is in
    # both its workers and types frames, as GET /workers and /automations list it.
    backend = await open_backend(memory_url())
    hub = EventHub(backend, heartbeat_seconds=5.0)
    schema = {"type": "object"}
    await backend.catalog.put(
        "hub-q", {"kind": "BatchAutomation", "queue": schema, "stream": schema}
    )
    await backend.catalog.put("hub-c", {"kind": "ContinuousAutomation"})
    await backend.workers.register("hub-x", "w9", {"host": "box"})
    await backend.workers.set_state("hub-x", "w9", {"state": "RUNNING", "last_seen": "1"})
    every = Frames(hub.stream(0.2))
    only_q = Frames(hub.stream(0.2, {"hub-q"}))
    try:
        names = [(await every.next())[0] for _ in range(4)]
        assert names == ["hello", "depths", "workers", "types"]
        # a late client gets the last snapshot, its types frame included, at once
        late = Frames(hub.stream(60.0))
        rows = (await late.next("types", timeout=2))[1]
        await late.stream.aclose()  # type: ignore[attr-defined]
        assert rows == [
            {
                "type": "hub-c",
                "kind": "ContinuousAutomation",
                "catalogued": True,
                "has_queue": False,
                "has_stream": False,
            },
            {
                "type": "hub-q",
                "kind": "BatchAutomation",
                "catalogued": True,
                "has_queue": True,
                "has_stream": True,
            },
            {
                "type": "hub-x",
                "kind": None,
                "catalogued": False,
                "has_queue": False,
                "has_stream": False,
            },
        ]
        assert [r["type"] for r in (await only_q.next("types"))[1]] == ["hub-q"]
        workers = (await every.next("workers"))[1]
        assert [(w["type"], w["worker_id"]) for w in workers] == [("hub-x", "w9")]
        # unchanged: further ticks send depths and workers, not types again
        seen = [(await every.next())[0] for _ in range(6)]
        assert "types" not in seen and seen.count("depths") >= 2
        # a new type: hello again, then a types frame with the new row
        await backend.catalog.put("hub-new", {"kind": "BatchAutomation", "queue": schema})
        assert "hub-new" in (await every.next("hello"))[1]["types"]
        rows = (await every.next("types"))[1]
        assert [r["type"] for r in rows] == ["hub-c", "hub-new", "hub-q", "hub-x"]
        assert set((await every.next("depths"))[1]) == {"hub-new", "hub-q"}
    finally:
        await every.stream.aclose()  # type: ignore[attr-defined]
        await only_q.stream.aclose()  # type: ignore[attr-defined]
        await hub.close()
        await backend.close()


async def test_the_hub_stops_when_the_last_client_leaves() -> None:
    backend = await open_backend(memory_url())
    hub = EventHub(backend, heartbeat_seconds=5.0)
    try:
        one = Frames(hub.stream(0.2))
        await one.next("hello")
        assert hub.running
        await one.stream.aclose()  # type: ignore[attr-defined]
        assert not hub.running and hub.clients == 0
        # a new viewer starts it again with a fresh subscription
        two = Frames(hub.stream(0.2))
        await two.next("hello")
        assert hub.running and hub.subscriptions_opened == 2
        await two.stream.aclose()  # type: ignore[attr-defined]
    finally:
        await hub.close()
        await backend.close()


async def test_a_client_that_stops_reading_is_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(event_hub, "MAX_PENDING", 20)
    backend = await open_backend(memory_url())
    hub = EventHub(backend, heartbeat_seconds=5.0)
    await backend.catalog.put("hub-slow", {})
    slow = Frames(hub.stream(30.0))
    reader = Frames(hub.stream(30.0))
    try:
        await slow.next("hello")
        await reader.next("hello")
        for i in range(40):
            await backend.events.publish("hub-slow.emit", {"i": i})
            await reader.next("emit")  # the reading client keeps up and stays
        names = await slow.rest()
        assert names[-1] == "error" and names.count("emit") <= 20
        assert hub.clients == 1
        await backend.events.publish("hub-slow.emit", {"i": "after"})
        assert (await reader.next("emit"))[1]["data"] == {"i": "after"}
    finally:
        await reader.stream.aclose()  # type: ignore[attr-defined]
        await hub.close()
        await backend.close()


@pytest.mark.skipif(REDIS_BIN is None, reason="redis-server not installed")
async def test_backend_loss_ends_every_stream_with_an_error() -> None:
    server = RedisServer()
    server.start()
    backend = await open_backend(server.url)
    hub = EventHub(backend, heartbeat_seconds=5.0)
    try:
        await backend.catalog.put("hub-down", {})
        clients = [Frames(hub.stream(0.3)) for _ in range(2)]
        for client in clients:
            await client.next("hello")
        server.stop(kill=True)
        for client in clients:
            names = await client.rest(timeout=30)
            assert names and names[-1] == "error"
        assert hub.clients == 0 and not hub.running
    finally:
        await hub.close()
        await backend.close()
        server.cleanup()


async def test_many_dashboards_hold_one_redis_subscription(
    live_factory: Any, redis_url: str
) -> None:
    live = live_factory(redis_url, sweeper=False)
    channel = event_channel(IDLE_TOPIC)
    probe = aioredis.Redis.from_url(redis_url)

    async def subscribers() -> int:
        counts = await probe.pubsub_numsub(channel)
        return int(counts[0][1])

    try:
        async with AsyncExitStack() as stack:
            client = await stack.enter_async_context(
                httpx.AsyncClient(base_url=live.url, headers=auth(ADMIN), timeout=30)
            )
            for _ in range(4):
                response = await stack.enter_async_context(
                    client.stream("GET", "/api/v1/events?interval=0.5")
                )
                lines = response.aiter_lines()
                async for line in lines:
                    if line == "event: hello":
                        break
            assert await subscribers() == 1
        # every viewer gone: the master lets go of the subscription too

        async def released() -> bool:
            return await subscribers() == 0

        await wait_for(released)
    finally:
        await probe.aclose()
