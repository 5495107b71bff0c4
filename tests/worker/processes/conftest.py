"""Fixtures of the tests that run ``fleet worker`` as a real process.

Here, and only here, ``url`` and ``backend`` name a file or server a separate
process can reach (SQLite and Redis): the memory backend lives inside one
process. They sit in this folder's conftest so that they do not shadow the
three-backend ``backend`` fixture of ``tests/conftest.py`` for the other worker
tests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from tests.worker.procs import WorkerProcess


@pytest.fixture(params=["sqlite", "redis"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A backend URL a worker process can open: a fresh SQLite file, or the session's Redis."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fleet.db'}"
    redis_url: str = request.getfixturevalue("redis_url")
    return redis_url


@pytest.fixture
async def backend(url: str) -> AsyncIterator[Backend]:
    """The test's own connection to ``url``."""
    b = await open_backend(url)
    try:
        yield b
    finally:
        await b.close()


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    """The worker processes a test starts (append them): killed if still running
    when it ends."""
    started: list[WorkerProcess] = []
    yield started
    for w in started:
        w.close()
