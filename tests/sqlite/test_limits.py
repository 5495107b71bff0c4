"""The SQLite limiters' tables shed what no longer matters (schema version 5)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from fleet.backends import open_backend
from fleet.core.clock import ManualClock
from tests.sqlite.helpers import url_for


def _rows(path: Path) -> tuple[int, int]:
    c = sqlite3.connect(path)
    try:
        holders = c.execute("SELECT COUNT(*) FROM limit_holders").fetchone()[0]
        limiters = c.execute("SELECT COUNT(*) FROM limiters").fetchone()[0]
        return int(holders), int(limiters)
    finally:
        c.close()


async def test_unused_limiters_are_pruned_by_later_writes(
    tmp_path: Path, frozen: ManualClock
) -> None:
    path = tmp_path / "fleet.db"
    backend = await open_backend(url_for(path))
    try:
        for i in range(20):  # dead holders and rates that stop mattering soon
            wait = await backend.limits.acquire(
                f"k{i}", "t", interval=0.05, concurrency=None, hold_seconds=0.1
            )
            assert wait == 0
        assert _rows(path) == (20, 20)
        frozen.advance(0.15)
        # Each acquire prunes two of each besides its own limiter's expired holders.
        for i in range(10):
            await backend.limits.acquire(
                "live", f"u{i}", interval=None, concurrency=None, hold_seconds=60
            )
        assert _rows(path) == (10, 0)  # only the live places are left
    finally:
        await backend.close()
