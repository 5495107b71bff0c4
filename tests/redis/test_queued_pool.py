"""The command pool is a queue, not a wall (issue 40, finding 2): calls past the
pool's connections wait for one, on one server, through Sentinel and on a cluster;
a pool that stays full past its wait is ``BackendBusy`` (busy, not down), and a
server that is not there is still ``BackendUnavailable``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from redis.asyncio import Redis

from fleet.backends import open_backend
from fleet.backends.redis import RedisBackend
from fleet.backends.redis.queued import POOL_CONNECTIONS, QueuedPool
from fleet.core.errors import BackendBusy, BackendUnavailable
from tests.support.redis_cluster import ClusterSet
from tests.support.redis_server import free_port
from tests.support.sentinel import SentinelSet

pytestmark = [pytest.mark.timeout(120)]

ENTRY: dict[str, Any] = {"type": "q", "kind": "BatchAutomation"}


async def _many_reads(url: str, callers: int) -> None:
    async with await open_backend(url) as backend:
        await backend.catalog.put("q", ENTRY)  # type: ignore[arg-type]
        found = await asyncio.gather(*(backend.catalog.get("q") for _ in range(callers)))
    assert all(f is not None and f["type"] == "q" for f in found)


async def test_calls_past_the_pool_wait_for_a_connection(redis_url: str) -> None:
    # three connections, 200 callers at once: all answered
    await _many_reads(f"{redis_url}?max_connections=3", 200)


async def test_a_pool_full_past_its_wait_is_busy_not_down(redis_url: str) -> None:
    pool = QueuedPool.from_url(redis_url, max_connections=1, queue_wait=0.2, queue_where="here")
    client = Redis.from_pool(pool)
    try:
        held = await pool.get_connection()
        with pytest.raises(BackendBusy, match="busy, not down") as caught:
            await client.ping()
        assert isinstance(caught.value, BackendUnavailable)  # the retrying callers retry
        await pool.release(held)
        assert await client.ping()
        # the place of a call that failed is given back
        assert pool._fleet_queue.waiting is False
    finally:
        await client.aclose()


async def test_a_server_that_is_not_there_is_still_unavailable() -> None:
    backend = RedisBackend(f"redis://127.0.0.1:{free_port()}/0")  # connects on first use
    try:
        with pytest.raises(BackendUnavailable) as caught:
            await backend.catalog.get("q")
        assert not isinstance(caught.value, BackendBusy)
        assert await backend.ping() is False
    finally:
        await backend.close()


@pytest.fixture
def sentinels() -> Iterator[SentinelSet]:
    s = SentinelSet()
    try:
        s.start()
        yield s
    finally:
        s.cleanup()


async def test_sentinel_pools_queue_too(sentinels: SentinelSet) -> None:
    # a Sentinel URL's pool options are not read: past its POOL_CONNECTIONS
    await _many_reads(sentinels.url, POOL_CONNECTIONS * 3)


@pytest.fixture
def cluster() -> Iterator[ClusterSet]:
    c = ClusterSet()
    try:
        c.start()
        yield c
    finally:
        c.cleanup()


async def test_cluster_clients_queue_too(cluster: ClusterSet) -> None:
    # a cluster URL takes no pool options: past the nodes' POOL_CONNECTIONS
    await _many_reads(cluster.url, POOL_CONNECTIONS * 3)
