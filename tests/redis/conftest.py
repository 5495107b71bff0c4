"""Fixtures of the Redis backend tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from fleet.backends.redis import RedisBackend


@pytest.fixture
async def rb(redis_url: str) -> AsyncIterator[RedisBackend]:
    """A connected RedisBackend on the flushed session server."""
    backend = RedisBackend(redis_url)
    await backend.connect()
    try:
        yield backend
    finally:
        await backend.close()
