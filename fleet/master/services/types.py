"""Automation types as the REST API lists them, and deleting all state of one."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import astuple
from typing import Any

from fleet.backends.base import Backend
from fleet.core import clock
from fleet.core.demand import RateBook, measure
from fleet.core.errors import Conflict
from fleet.core.runs import OPEN_STATES
from fleet.master.services.catalog import all_entries, find_entry, summary, unknown_type
from fleet.master.services.shared_views import WorkersRead
from fleet.master.services.workers_view import load_views, worker_counts
from fleet.protocol import CONTROL_NS, drain_key


async def type_rows(
    backend: Backend,
    sees_type: Callable[[str], bool],
    heartbeat_seconds: float,
    read: WorkersRead | None = None,
    rates: RateBook | None = None,
) -> list[dict[str, Any]]:
    """Every catalogued type, and every type that has workers, that ``sees_type``
    lets through: its kind, worker counts and queue depths (``GET /automations``).

    Args:
        backend: Where the catalog and the depths are read.
        sees_type: Which types to list.
        heartbeat_seconds: Heartbeat period, for the counts of workers up.
        read: The master's shared read of the worker views (None: read them now).
        rates: Where the master measures arrival and completion rates (None: the
            ``demand`` of each row has none, and counts no rate).
    """
    entries = await all_entries(backend)
    if read is None:
        pairs = await backend.workers.all()
        views = await load_views(backend, pairs, heartbeat_seconds)
        read = WorkersRead(pairs, views, 0.0)
    shown = [t for t in sorted({*entries, *read.types}) if sees_type(t)]
    queued = [t for t in shown if (entries.get(t) or {}).get("queue")]
    # one round trip per type, all at once (the overview of many types waits for one)
    depths = dict(
        zip(queued, await asyncio.gather(*(backend.queues.depths(t) for t in queued)), strict=True)
    )
    out = []
    now = clock.now()
    for t in shown:
        views = read.of_type(t)
        queue = depths[t].to_dict() if t in depths else None
        counts = worker_counts(views)
        # An entry that cannot be read is listed, with why instead of its kind.
        row = summary(t, entries.get(t), workers=counts, queue=queue)
        if t in depths:
            c = depths[t].counters
            pair = rates.rates(t, now, c.submitted, c.completed) if rates else (None, None)
            up = [v for v in views if v["up"]]
            row["demand"] = measure(
                depths[t],
                pair,
                workers=len(up),
                slots=sum(v["slots"]["total"] for v in up),
                slots_busy=sum(v["slots"]["busy"] for v in up),
            )
        out.append(row)
    return out


async def _holds_nothing(backend: Backend, automation_type: str) -> bool:
    """No catalog entry, no task in any state, no counter, no schedule (workers aside)."""
    if await find_entry(backend, automation_type) is not None:
        return False
    depths = await backend.queues.depths(automation_type)
    held = depths.pending + depths.processing + depths.scheduled + depths.dead
    if held or any(astuple(depths.counters)):
        return False
    return not await backend.schedules.listing_raw(automation_type)


async def _refuse_if_runs_hold(backend: Backend, automation_type: str) -> None:
    """409 while a running run has live tasks of the type: purging them would leave
    the run waiting for ever for tasks that no longer exist. Cancelling the run first
    ends it and its tasks the way a run should end."""
    page = await backend.runs.page(limit=200)
    while True:
        for run in page.runs:
            live = run.by_type.get(automation_type, {})
            held = live.get("pending", 0) + live.get("running", 0)
            if run.state in OPEN_STATES and held > 0:
                raise Conflict(
                    f"run {run.id} has {held} live task(s) of {automation_type!r}: cancel "
                    f"the run first (DELETE /api/v1/runs/{run.id}), then delete the type",
                    resource="run",
                    key=run.id,
                    automation_type=automation_type,
                )
        if page.next is None:
            return
        page = await backend.runs.page(after=page.next, limit=200)


async def delete_type(
    backend: Backend, automation_type: str, forget: Callable[[str], None]
) -> None:
    """Delete the type's queue, task states, stream, catalog entry, config, worker
    records and drain flags; ``forget`` drops what this master keeps of it.

    Raises:
        NotFound: 404 for a type the backend holds nothing of.
        Conflict: 409 while a running run has live tasks of it.
    """
    worker_ids = await backend.workers.ids(automation_type)
    if not worker_ids and await _holds_nothing(backend, automation_type):
        raise await unknown_type(backend, automation_type)
    await _refuse_if_runs_hold(backend, automation_type)
    await backend.purge_type(automation_type)
    forget(automation_type)
    for wid in worker_ids:  # drain flags live in the KV store, outside the type's keys
        await backend.kv.delete(CONTROL_NS, drain_key(automation_type, wid))
