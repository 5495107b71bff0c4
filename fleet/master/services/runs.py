"""Runs over REST: create, read (with ``?wait``), list, cancel, and the run check of
a submit (docs/runs.md). The routes of ``routes/runs.py`` parse and answer."""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException

from fleet.backends.base import Backend
from fleet.core.errors import ContractValueError, UnsupportedBackend
from fleet.core.results import MAX_WAIT_SECONDS
from fleet.core.runs import RunRecord, check_on_complete, check_run_name
from fleet.master.services.validation import InvalidInput
from fleet.master.services.waits import Waits
from fleet.protocol import cancel_topic

#: Most runs one page lists.
MAX_PAGE = 500


def _unsupported(exc: UnsupportedBackend) -> HTTPException:
    return HTTPException(501, detail=str(exc))


def _invalid(exc: ContractValueError, where: str) -> InvalidInput:
    field = getattr(exc, "field", None) or where
    return InvalidInput(
        [{"type": "value_error", "loc": ["body", *str(field).split(".")], "msg": str(exc)}]
    )


async def create(backend: Backend, name: Any, on_complete: Any) -> dict[str, Any]:
    """Create a run; ``{"run_id"}``.

    Raises:
        InvalidInput: a bad name or ``on_complete`` (422).
        HTTPException: 501 on a backend without runs.
    """
    try:
        checked_name = check_run_name(name)
        checked = check_on_complete(on_complete)
    except ContractValueError as exc:
        raise _invalid(exc, "on_complete") from None
    try:
        run_id = await backend.runs.create(name=checked_name, on_complete=checked)
    except UnsupportedBackend as exc:
        raise _unsupported(exc) from None
    return {"run_id": run_id}


async def _get(backend: Backend, run_id: str) -> RunRecord:
    try:
        record = await backend.runs.get(run_id)
    except UnsupportedBackend as exc:
        raise _unsupported(exc) from None
    if record is None:
        raise HTTPException(404, detail=f"run {run_id!r} is unknown (or expired)")
    return record


async def get(
    backend: Backend, run_id: str, wait: float | None = None, waits: Waits | None = None
) -> dict[str, Any]:
    """A run's record; with ``wait`` seconds (at most 60), answered once it ended
    or when the time is up (the wait one of ``waits``': the master's shared poller
    of runs, one read a tick for all).

    Raises:
        HTTPException: 404 for an unknown run.
    """
    record = await _get(backend, run_id)
    if wait is not None and record.state == "running":
        waited = await (waits or Waits(backend)).run(run_id, min(wait, MAX_WAIT_SECONDS))
        record = waited if waited is not None else await _get(backend, run_id)
    return record.to_dict()


async def page(backend: Backend, after: str | None, limit: int) -> dict[str, Any]:
    """``{"runs": [...], "next": cursor | None}``, newest first."""
    try:
        found = await backend.runs.page(after=after, limit=min(limit, MAX_PAGE))
    except UnsupportedBackend as exc:
        raise _unsupported(exc) from None
    return {"runs": [r.to_dict() for r in found.runs], "next": found.next}


async def cancel(backend: Backend, run_id: str) -> dict[str, Any]:
    """Cancel a run: its queued and scheduled tasks are cancelled, its running ones
    are stopped in their slots (the cancel is published to their type's workers);
    the run ends ``cancelled`` without its ``on_complete``.

    Raises:
        HTTPException: 404 for an unknown run.
    """
    try:
        done = await backend.runs.cancel(run_id)
    except UnsupportedBackend as exc:
        raise _unsupported(exc) from None
    if done is None:
        raise HTTPException(404, detail=f"run {run_id!r} is unknown (or expired)")
    for automation_type, task_id in done.stopping:
        await backend.events.publish(cancel_topic(automation_type), {"task_id": task_id})
    return done.record.to_dict()


async def check_open(backend: Backend, run_id: str) -> None:
    """A submit into ``run_id`` may go ahead: the run exists and is running.

    Raises:
        HTTPException: 404 unknown (or expired) run, 409 a run that ended.
    """
    record = await _get(backend, run_id)
    if record.state != "running":
        raise HTTPException(
            409, detail=f"run {run_id!r} has ended ({record.state}): it takes no more tasks"
        )
