"""Runs on the Redis backend: not supported yet.

Guarantee 1 of the design: a feature that does not work on a backend is refused
with a clear error. Runs work on memory and SQLite (``fleet/backends/memory/runs.py``,
``fleet/backends/sqlite/runs.py``); on Redis their counters must move inside the
queue scripts, which is still to be written (docs/runs.md, "Backends").
"""

from __future__ import annotations

from typing import Any, NoReturn

from fleet.core.capabilities.runs import Runs
from fleet.core.errors import UnsupportedBackend
from fleet.core.runs import RunCancel, RunPage, RunRecord


def _refuse() -> NoReturn:
    raise UnsupportedBackend(
        "runs are not supported on the Redis backend yet (they work on memory:// and "
        "sqlite://); see docs/runs.md"
    )


class RunOps(Runs):
    """The :class:`Runs` capability on Redis: refused with a clear error."""

    async def run_create(
        self, *, name: str | None = None, on_complete: dict[str, Any] | None = None
    ) -> str:
        _refuse()

    async def run_get(self, run_id: str) -> RunRecord | None:
        _refuse()

    async def run_list(self, *, after: str | None = None, limit: int = 50) -> RunPage:
        _refuse()

    async def run_cancel(self, run_id: str) -> RunCancel | None:
        _refuse()
