"""Runs over REST: create, read (with ``?wait``), list, cancel, pause and resume, and
the run check of a submit (docs/runs.md, docs/costs.md). The routes of
``routes/runs.py`` parse and answer."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from fleet.backends.base import Backend
from fleet.core.budgets import check_budget, left, over
from fleet.core.errors import (
    Conflict,
    ContractValueError,
    Forbidden,
    InvalidInput,
    NotFound,
    TooLarge,
    Unsupported,
    UnsupportedBackend,
)
from fleet.core.meters import run_scope
from fleet.core.monitors import Monitors
from fleet.core.results import MAX_WAIT_SECONDS
from fleet.core.runs import (
    MAX_ON_COMPLETE_BYTES,
    OPEN_STATES,
    OnCompleteTooLarge,
    RunRecord,
    check_max_delay,
    check_on_complete,
    check_reason,
    check_run_id,
    check_run_name,
    check_run_types,
    delay_refusal,
)
from fleet.master.services import monitors as run_monitors
from fleet.master.services.catalog import require_entry
from fleet.master.services.waits import Waits
from fleet.protocol import cancel_topic

#: Most runs one page lists.
MAX_PAGE = 500
#: A page of runs stops before its runs pass this many bytes of JSON (a run's
#: ``on_complete`` may be up to a request body's size); ``next`` goes on from there.
MAX_PAGE_BYTES = 1 << 20
#: Runs read from the backend at a time while a page is filled, so that a page of
#: large runs is cut after reading a few of them, not ``limit``.
PAGE_CHUNK = 25


def _unsupported(exc: UnsupportedBackend) -> Unsupported:
    return Unsupported(str(exc), resource="runs")


def _unknown(run_id: str) -> NotFound:
    return NotFound(f"run {run_id!r} is unknown (or expired)", resource="run", key=run_id)


def _invalid(exc: ContractValueError, where: str) -> InvalidInput:
    field = getattr(exc, "field", None) or where
    return InvalidInput(
        [{"type": "value_error", "loc": ["body", *str(field).split(".")], "msg": str(exc)}]
    )


async def create(
    backend: Backend,
    name: Any,
    on_complete: Any,
    types: Any = None,
    max_delay_seconds: Any = None,
    max_bytes: int = MAX_ON_COMPLETE_BYTES,
    budget: Any = None,
    monitors: Any = None,
) -> dict[str, Any]:
    """Create a run; ``{"run_id"}``. ``on_complete.type`` must be a type the catalog
    knows; its JSON at most ``max_bytes`` (a task payload's cap, the request body
    limit).

    Raises:
        InvalidInput: a bad name, ``on_complete``, ``types`` or ``max_delay_seconds`` (422).
        NotFound: 404 for an unknown ``on_complete.type`` (naming the closest
            known types).
        TooLarge: 413 for an ``on_complete`` over ``max_bytes``.
        Unsupported: 501 on a backend without runs.
    """
    try:
        checked_name = check_run_name(name)
        checked = check_on_complete(on_complete, max_bytes=max_bytes)
        checked_types = check_run_types(types)
        max_delay = check_max_delay(max_delay_seconds)
        caps = check_budget(budget)
    except OnCompleteTooLarge as exc:
        raise TooLarge(exc.message, resource="on_complete") from None
    except ContractValueError as exc:
        raise _invalid(exc, "on_complete") from None
    if checked is not None:
        await require_entry(backend, checked["type"])
    spec = await monitor_spec(backend, monitors, checked_types)
    try:
        run_id = await backend.runs.create(
            name=checked_name,
            on_complete=checked,
            types=checked_types,
            max_delay_seconds=max_delay,
            budget=caps,
        )
    except UnsupportedBackend as exc:
        raise _unsupported(exc) from None
    if spec is not None:
        await run_monitors.keep_spec(backend, run_id, spec)
    return {"run_id": run_id}


async def monitor_spec(
    backend: Backend, monitors: Any, types: tuple[str, ...] | None
) -> Monitors | None:
    """A run's ``monitors`` checked: each threshold in range, each ``max_null_rate``
    field one the ``Output`` of one of the run's ``types`` declares.

    Raises:
        InvalidInput: 422 naming the field at fault.
    """
    if monitors is None:
        return None
    try:
        spec = Monitors.model_validate(monitors)
    except ValidationError as exc:
        raise InvalidInput(
            [
                {"type": e["type"], "loc": ["body", "monitors", *e["loc"]], "msg": e["msg"]}
                for e in exc.errors()
            ]
        ) from None
    if spec.max_null_rate:
        fields: set[str] = set()
        for t in types or ():
            fields |= run_monitors.output_fields(await backend.catalog.get(t))
        for name in sorted(spec.max_null_rate):
            if name not in fields:
                loc = ["body", "monitors", "max_null_rate", name]
                msg = (
                    f"max_null_rate names {name!r}, a field no Output of the run's types "
                    f"({', '.join(types or ()) or 'none named: give types'}) declares"
                )
                raise InvalidInput([{"type": "value_error", "loc": loc, "msg": msg}])
    return spec


async def _get(backend: Backend, run_id: str) -> RunRecord:
    try:
        record = await backend.runs.get(run_id)
    except UnsupportedBackend as exc:
        raise _unsupported(exc) from None
    if record is None:
        raise _unknown(run_id)
    return record


async def get(
    backend: Backend, run_id: str, wait: float | None = None, waits: Waits | None = None
) -> dict[str, Any]:
    """A run's record and its meters (what its tasks spent, docs/costs.md); with
    ``wait`` seconds (at most 60), answered once it ended
    or when the time is up (the wait one of ``waits``': the master's shared poller
    of runs, one read a tick for all).

    Raises:
        NotFound: 404 for an unknown run.
    """
    record = await _get(backend, run_id)
    if wait is not None and record.state in OPEN_STATES:
        waited = await (waits or Waits(backend)).run(run_id, min(wait, MAX_WAIT_SECONDS))
        record = waited if waited is not None else await _get(backend, run_id)
    return await with_meters(backend, record)


async def with_meters(backend: Backend, record: RunRecord) -> dict[str, Any]:
    """A run's record with its meters and, if it has a budget, what is left of it."""
    found = await backend.meters.get([run_scope(record.id)])
    meters = found.get(run_scope(record.id), {})
    out = {**record.to_dict(), "meters": meters}
    watched = await run_monitors.states(backend, record, meters)
    if watched:
        out["monitors"] = [m.to_dict() for m in watched]
    if record.budget:
        out["budget_left"] = left(record.budget, meters)
    return out


async def page(backend: Backend, after: str | None, limit: int) -> dict[str, Any]:
    """``{"runs": [...], "next": cursor | None}``, newest first: at most ``limit``
    runs, and no more than fit in :data:`MAX_PAGE_BYTES` of JSON (always one)."""
    limit = min(limit, MAX_PAGE)
    shown: list[dict[str, Any]] = []
    size = 0
    cursor = after
    while True:
        try:
            found = await backend.runs.page(after=cursor, limit=min(PAGE_CHUNK, limit - len(shown)))
        except UnsupportedBackend as exc:
            raise _unsupported(exc) from None
        for record in found.runs:
            item = record.to_dict()
            size += len(json.dumps(item, separators=(",", ":")).encode())
            if shown and size > MAX_PAGE_BYTES:
                return {"runs": shown, "next": shown[-1]["run_id"]}
            shown.append(item)
        if found.next is None or len(shown) >= limit:
            return {"runs": shown, "next": found.next}
        cursor = found.next


async def cancel(backend: Backend, run_id: str) -> dict[str, Any]:
    """Cancel a run: its queued and scheduled tasks are cancelled, its running ones
    are stopped in their slots (the cancel is published to their type's workers);
    the run ends ``cancelled`` without its ``on_complete``.

    Raises:
        InvalidInput: ``run_id`` is not a run id (422).
        NotFound: 404 for an unknown run.
    """
    valid_run_id(run_id, ("path", "run_id"))
    try:
        done = await backend.runs.cancel(run_id)
    except UnsupportedBackend as exc:
        raise _unsupported(exc) from None
    if done is None:
        raise _unknown(run_id)
    for automation_type, task_id in done.stopping:
        await backend.events.publish(cancel_topic(automation_type), {"task_id": task_id})
    return done.record.to_dict()


async def pause(backend: Backend, run_id: str, reason: Any) -> dict[str, Any]:
    """Pause a running run: its queued tasks wait, its running ones finish.

    Raises:
        InvalidInput: 422, not a run id, or a bad reason.
        NotFound: 404 for an unknown run.
        Conflict: 409, the run has ended.
    """
    valid_run_id(run_id, ("path", "run_id"))
    try:
        why = check_reason("paused by an operator" if reason is None else reason)
    except ContractValueError as exc:
        raise _invalid(exc, "reason") from None
    try:
        record = await backend.runs.pause(run_id, why)
    except UnsupportedBackend as exc:
        raise _unsupported(exc) from None
    if record is None:
        raise _unknown(run_id)
    _still_open(record)
    return await with_meters(backend, record)


async def resume(backend: Backend, run_id: str, budget: Any) -> dict[str, Any]:
    """Resume a paused run (and, with ``budget``, replace its budget; on a running run
    that is all it does). A run still past its budget is refused: raise it.

    Raises:
        InvalidInput: 422, not a run id, a bad budget, or one its meters already reach.
        NotFound: 404 for an unknown run.
        Conflict: 409, the run has ended.
    """
    valid_run_id(run_id, ("path", "run_id"))
    try:
        caps = check_budget(budget)
    except ContractValueError as exc:
        raise _invalid(exc, "budget") from None
    record = await _get(backend, run_id)
    _still_open(record)
    found = await backend.meters.get([run_scope(run_id)])
    why = over(caps if caps is not None else record.budget, found.get(run_scope(run_id), {}))
    if why is not None:
        msg = f"the run is still at its budget ({why}): resume with a raised budget"
        raise InvalidInput([{"type": "value_error", "loc": ["body", "budget"], "msg": msg}])
    try:
        after = await backend.runs.resume(run_id, caps)
    except UnsupportedBackend as exc:
        raise _unsupported(exc) from None
    if after is None:
        raise _unknown(run_id)
    _still_open(after)
    return await with_meters(backend, after)


def _still_open(record: RunRecord) -> None:
    if record.state not in OPEN_STATES:
        raise Conflict(
            f"run {record.id!r} has ended ({record.state}): it can no longer be paused or resumed",
            resource="run",
            key=record.id,
        )


def valid_run_id(run_id: str, loc: tuple[str, ...]) -> str:
    """``run_id`` if it is a run id (32 lowercase hex digits).

    Raises:
        InvalidInput: 422 at ``loc``; nothing that is not a run id reaches a backend.
    """
    try:
        return check_run_id(run_id, field=".".join(loc[1:]) or "run")
    except ContractValueError as exc:
        raise InvalidInput(
            [{"type": "value_error", "loc": list(loc), "msg": exc.message}]
        ) from None


async def open_run(backend: Backend, run_id: str) -> RunRecord:
    """The run a submit names (``body.run``), if it takes tasks.

    Raises:
        InvalidInput: 422, ``run_id`` is not a run id.
        NotFound: 404 unknown (or expired) run.
        Conflict: 409 a run that ended.
    """
    valid_run_id(run_id, ("body", "run"))
    record = await _get(backend, run_id)
    if record.state not in OPEN_STATES:
        raise Conflict(
            f"run {run_id!r} has ended ({record.state}): it takes no more tasks",
            resource="run",
            key=run_id,
        )
    return record


def admit(
    record: RunRecord, automation_type: str, scoped: frozenset[str] | None, delay: float | None
) -> None:
    """A submit of a task of ``automation_type`` into the running run ``record``,
    ``delay`` seconds ahead, may go ahead: by an admin token (``scoped`` None)
    always; by a scoped token (``scoped``: its types) only into a run whose
    ``types`` name ``automation_type``; and no task later than the run's
    ``max_delay_seconds``.

    Raises:
        Forbidden: 403, a scoped token into a run that does not name its type.
        InvalidInput: 422, a delay past the run's ``max_delay_seconds``.
    """
    if scoped is not None and (record.types is None or automation_type not in record.types):
        named = "names no types" if record.types is None else "does not name this type"
        raise Forbidden(
            f"run {record.id!r} {named}: a scoped token may submit into a run only "
            f"when the run lists the task's type ({automation_type!r}) in its types",
            resource="run",
            key=record.id,
            automation_type=automation_type,
        )
    why = delay_refusal(delay or 0.0, record.max_delay_seconds)
    if why is not None:
        raise InvalidInput([{"type": "value_error", "loc": ["body", "delay_seconds"], "msg": why}])


async def check_open(
    backend: Backend,
    run_id: str,
    automation_type: str,
    scoped: frozenset[str] | None,
    delay: float | None,
) -> None:
    """A submit into ``run_id`` may go ahead: :func:`open_run`, then :func:`admit`."""
    admit(await open_run(backend, run_id), automation_type, scoped, delay)
