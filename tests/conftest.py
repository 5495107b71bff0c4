"""Session fixtures: a real redis-server, and backends for the conformance suite."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core import clock
from fleet.core.clock import ManualClock
from tests.support.redis_server import REDIS_BIN, RedisServer, require_redis

# Tests must not depend on which plugins happen to be installed in the venv (`make dev`
# installs the examples into it): every process a test starts, and discovery in this one,
# load only the --plugin / FLEET_PLUGINS modules the test names. Tests of entry-point
# discovery opt back in explicitly.
os.environ["FLEET_ENTRY_POINTS"] = "0"

# A shell script that runs the suite in the background (`make test &`) starts it with
# SIGINT ignored, and children inherit that: the tests that stop a child with SIGINT
# (as Ctrl-C would) need it back to the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

#: Every backend the conformance suite runs against. A new backend joins by
#: adding its name here (and a branch in ``make_backend_url``).
BACKENDS = ["memory", "sqlite", "redis"]


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One real redis-server for the whole session (no persistence)."""
    if REDIS_BIN is None:
        if require_redis():
            pytest.fail("redis-server is required (FLEET_TEST_REQUIRE_REDIS=1) but not found")
        pytest.skip("redis-server not installed")
    server = RedisServer()
    server.start()
    yield server
    server.cleanup()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The session server's URL, flushed before the test."""
    import redis

    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    return redis_server.url


_memory_counter = 0


def make_backend_url(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    global _memory_counter
    if kind == "memory":
        _memory_counter += 1
        return f"memory://conformance-{_memory_counter}"
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'fleet.db'}"
    if kind == "redis":
        url: str = request.getfixturevalue("redis_url")
        return url
    raise ValueError(kind)


@pytest.fixture(params=BACKENDS)
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty backend URL of each kind."""
    return make_backend_url(request.param, request, tmp_path)


@pytest.fixture(params=["redis", "sqlite"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A backend that several processes share: the session's Redis, and a SQLite file."""
    return make_backend_url(request.param, request, tmp_path)


@pytest.fixture
async def backend(backend_url: str) -> AsyncIterator[Backend]:
    """A connected, empty backend of each kind; closed after the test."""
    b = await open_backend(backend_url)
    try:
        yield b
    finally:
        await b.close()


@pytest.fixture
def frozen() -> Iterator[ManualClock]:
    """Fleet's clock stopped for the test (``fleet.core.clock``): it moves only with
    ``frozen.advance(seconds)``, so a test of a time rule does not sleep."""
    with clock.frozen() as manual:
        yield manual
