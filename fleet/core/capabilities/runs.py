"""Runs: the tasks of one job across types, counted atomically with their task
operations, ended exactly once, with a callback task submitted once
(``fleet.core.runs`` holds the model and the rule; docs/runs.md the guide)."""

from __future__ import annotations

import abc
from typing import Any

from fleet.core.runs import DEFAULT_MAX_DELAY, RunCancel, RunPage, RunRecord


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
    stays ended. Neither is a push delayed past the run's ``max_delay_seconds``
    (``refused="delay"``). A dead task of an ended run that is replayed is counted
    (``replayed``) but does not reopen it.

    A ``unique_key`` belongs to the run and the task's type: the same key in two
    types of one run is two keys.

    A running run with nothing of it moving for ``FLEET_RUN_IDLE_TTL_SECONDS``
    (:func:`fleet.core.runs.idle_until`; a task scheduled ahead counts as moving
    when it is due) expires: it is forgotten as a run that ended is
    ``FLEET_RUN_TTL_SECONDS`` after its end. An id that is not a run id
    (:func:`fleet.core.runs.is_run_id`) is an unknown run.
    """

    @abc.abstractmethod
    async def create(
        self,
        *,
        name: str | None = None,
        on_complete: dict[str, Any] | None = None,
        types: tuple[str, ...] | None = None,
        max_delay_seconds: float = DEFAULT_MAX_DELAY,
        budget: dict[str, float] | None = None,
    ) -> str:
        """Create a run (state ``running``, counters zero); returns its id. ``types``
        are the types a scoped token may submit into it (the master checks them);
        ``max_delay_seconds`` the longest delay a task of it may have; ``budget`` its
        caps by meter (:func:`fleet.core.budgets.check_budget`): the step that adds
        meters past a cap pauses it."""

    @abc.abstractmethod
    async def get(self, run_id: str) -> RunRecord | None:
        """The run, or None if unknown or expired (``FLEET_RUN_TTL_SECONDS`` after it
        ended, ``FLEET_RUN_IDLE_TTL_SECONDS`` after it last moved while running)."""

    @abc.abstractmethod
    async def page(self, *, after: str | None = None, limit: int = 50) -> RunPage:
        """Runs, newest first; ``after`` is the ``next`` cursor of the page before."""

    @abc.abstractmethod
    async def cancel(self, run_id: str) -> RunCancel | None:
        """End a running run ``cancelled`` (no ``on_complete``): its queued and
        scheduled tasks are cancelled, its processing ones flagged as a task cancel
        does (listed in ``stopping``). A run that already ended is answered as it
        is. None if unknown."""

    @abc.abstractmethod
    async def pause(self, run_id: str, reason: str = "paused by an operator") -> RunRecord | None:
        """Pause a running run: its queued tasks stay queued and are not delivered
        (a reserve that takes one parks it), its running ones finish; it keeps taking
        pushes, its counters, unique keys and callback. The ``runs`` event
        ``paused`` carries ``reason``. A run in another state is answered as it is;
        None if unknown."""

    @abc.abstractmethod
    async def resume(self, run_id: str, budget: dict[str, float] | None = None) -> RunRecord | None:
        """A paused run runs again: its parked tasks are queued again (at the tail of
        their tier or group) and the ``runs`` event ``resumed`` is published.
        ``budget`` (checked) replaces its budget; on a running run it only does that.
        A run that ended is answered as it is; None if unknown."""
