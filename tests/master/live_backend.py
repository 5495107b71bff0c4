"""Fixtures of the tests that read a live master over HTTP and write its backend as a
worker would, on SQLite and Redis: import them into a test module
(``from tests.master.live_backend import backend, backend_url, http, live``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend


@pytest.fixture(params=["sqlite", "redis"])
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fleet.db'}"
    url: str = request.getfixturevalue("redis_url")
    return url


@pytest.fixture
def live(backend_url: str, live_factory: Any) -> Any:
    return live_factory(backend_url, sweeper=False)


@pytest.fixture
async def http(live: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as client:
        yield client


@pytest.fixture
async def backend(backend_url: str, live: Any) -> AsyncIterator[Backend]:
    """The live master's backend, opened by the test (as a worker opens it)."""
    b = await open_backend(backend_url)
    try:
        yield b
    finally:
        await b.close()
