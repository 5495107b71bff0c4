"""Fixtures of the worker tests."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend


@pytest.fixture
async def mem() -> AsyncIterator[Backend]:
    """A fresh in-process memory backend."""
    backend = await open_backend(f"memory://worker-test-{uuid.uuid4().hex}")
    try:
        yield backend
    finally:
        await backend.close()


@pytest.fixture(params=["sqlite", "redis"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A backend URL shared by real worker processes: a SQLite file, then Redis."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fleet.db'}"
    redis_url: str = request.getfixturevalue("redis_url")
    return redis_url


@pytest.fixture
async def backend(url: str) -> AsyncIterator[Backend]:
    """The test's own backend on ``url``."""
    b = await open_backend(url)
    try:
        yield b
    finally:
        await b.close()
