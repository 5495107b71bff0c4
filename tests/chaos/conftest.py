"""Chaos fixtures: a backend of each kind with persistence, a fleet, and the table."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.chaos.harness import ChaosFleet, Verdict
from tests.support.redis_server import REDIS_BIN, RedisServer, require_redis

RESULTS: list[Verdict] = []


@pytest.fixture
def aof_redis() -> Iterator[RedisServer]:
    """A private redis-server with AOF (appendfsync always): a kill -9 loses nothing."""
    if REDIS_BIN is None:
        if require_redis():
            pytest.fail("redis-server is required (FLEET_TEST_REQUIRE_REDIS=1) but not found")
        pytest.skip("redis-server not installed")
    server = RedisServer(aof=True)
    server.start()
    yield server
    server.cleanup()


@pytest.fixture(params=["redis", "sqlite"])
def chaos_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fleet.db'}"
    server: RedisServer = request.getfixturevalue("aof_redis")
    return server.url


@pytest.fixture
async def fleet(chaos_url: str, tmp_path: Path) -> AsyncIterator[ChaosFleet]:
    f = ChaosFleet(chaos_url, tmp_path)
    try:
        yield f
    finally:
        f.close()


@pytest.fixture(scope="session", autouse=True)
def chaos_table() -> Iterator[None]:
    """Print the chaos table (scenario, tasks, executions, lost, duplicates, DLQ,
    recovery) at the end of the session: `make chaos` shows it."""
    yield
    if RESULTS:
        lines = [
            "",
            "| scenario | backend | tasks | executions | lost | duplicates | DLQ | recovery |",
            "|---|---|---|---|---|---|---|---|",
            *(v.row() for v in RESULTS),
        ]
        print("\n".join(lines))
