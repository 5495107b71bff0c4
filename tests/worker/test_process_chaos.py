"""A worker process keeps working through a Redis crash and restart (AOF)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from tests.support.redis_server import REDIS_BIN, RedisServer
from tests.worker.procs import WorkerProcess
from tests.worker.support import push, state_of, wait_until

E = "wt-echo"


pytestmark = pytest.mark.slow


@pytest.fixture
def aof_redis() -> Iterator[RedisServer]:
    if REDIS_BIN is None:
        pytest.skip("redis-server not installed")
    server = RedisServer(aof=True)
    server.start()
    yield server
    server.cleanup()


async def all_done(url: str, ids: list[str]) -> bool:
    backend: Backend = await open_backend(url)
    try:
        states = [(await backend.queues.state(E, t)).state for t in ids]
        return all(s == "done" for s in states)
    finally:
        await backend.close()


async def test_worker_survives_a_redis_crash(aof_redis: RedisServer, tmp_path: Path) -> None:
    url = aof_redis.url
    worker = WorkerProcess(url, "tests.plugins_fixture.echo", E, "chaos", tmp_path)
    try:
        backend = await open_backend(url)
        try:

            async def up() -> bool:
                return (await state_of(backend, E, "chaos")).get("state") == "RUNNING"

            await wait_until(up, timeout=30, what="worker up")
            before = await push(backend, E, *[{"n": i} for i in range(5)])
        finally:
            await backend.close()
        await wait_until(lambda: all_done(url, before), timeout=30, what="tasks before crash")

        aof_redis.stop(kill=True)
        await asyncio.sleep(1.5)  # the worker's reserve, heartbeat and events all fail now
        assert worker.proc.poll() is None, worker.log()
        aof_redis.start()

        backend = await open_backend(url)
        try:
            after = await push(backend, E, *[{"n": 10 + i} for i in range(5)])
        finally:
            await backend.close()
        await wait_until(lambda: all_done(url, after), timeout=30, what="tasks after restart")
        assert worker.proc.poll() is None
    finally:
        worker.close()
