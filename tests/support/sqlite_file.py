"""The ``backend`` fixture of the tests that run one worker in process on a SQLite file
(``from tests.support.sqlite_file import backend``): a fresh file per test, closed
after it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[Backend]:
    """A backend on a new SQLite file of the test's own."""
    b = await open_backend(f"sqlite:///{tmp_path / 'fleet.db'}")
    try:
        yield b
    finally:
        await b.close()
