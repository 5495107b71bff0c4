"""Runs: the tasks of one job across types, counted atomically with their task
operations, ended exactly once, with a callback task submitted once
(``fleet.core.runs`` holds the model and the rule; docs/runs.md the guide)."""

from __future__ import annotations

import abc
from typing import Any

from fleet.core.runs import RunCancel, RunPage, RunRecord


class Runs(abc.ABC):
    """Create, read, list and cancel runs.

    A task joins a run by its body's ``run``; every queue operation of such a task
    (push, reserve, ack, nack, release, throttle, sweep, cancel, dead-lettering,
    replay, ttl expiry) moves the run's counters in the same atomic step
    (:func:`fleet.core.runs.deltas`). The step that ends the run (state
    ``running`` → ``done``) also pushes its ``on_complete`` task, with the id
    :func:`fleet.core.runs.callback_task_id` and the payload
    :func:`fleet.core.runs.callback_payload`, so it is queued exactly once.

    Pushes into a run that is not ``running`` (done, cancelled, unknown or
    expired) are not queued (``queued=False, duplicate=False``): a run that ended
    stays ended. A dead task of an ended run that is replayed is counted
    (``replayed``) but does not reopen it.
    """

    @abc.abstractmethod
    async def create(
        self, *, name: str | None = None, on_complete: dict[str, Any] | None = None
    ) -> str:
        """Create a run (state ``running``, counters zero); returns its id."""

    @abc.abstractmethod
    async def get(self, run_id: str) -> RunRecord | None:
        """The run, or None if unknown or expired (``FLEET_RUN_TTL_SECONDS`` after it ended)."""

    @abc.abstractmethod
    async def page(self, *, after: str | None = None, limit: int = 50) -> RunPage:
        """Runs, newest first; ``after`` is the ``next`` cursor of the page before."""

    @abc.abstractmethod
    async def cancel(self, run_id: str) -> RunCancel | None:
        """End a running run ``cancelled`` (no ``on_complete``): its queued and
        scheduled tasks are cancelled, its processing ones flagged as a task cancel
        does (listed in ``stopping``). A run that already ended is answered as it
        is. None if unknown."""
