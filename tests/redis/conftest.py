"""Fixtures of the Redis backend tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import redis.asyncio as aioredis

from fleet.backends.redis import RedisBackend
from tests.support.redis_server import RedisServer


@pytest.fixture
async def rb(redis_url: str) -> AsyncIterator[RedisBackend]:
    """A connected RedisBackend on the flushed session server."""
    backend = RedisBackend(redis_url)
    await backend.connect()
    try:
        yield backend
    finally:
        await backend.close()


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """A plain redis-py client on the flushed session server, answers decoded: the
    keys as an operator with redis-cli sees them."""
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
def own_server() -> Iterator[RedisServer]:
    """A redis-server of the test's own (to stop, kill and start again)."""
    srv = RedisServer()
    srv.start()
    yield srv
    srv.cleanup()
