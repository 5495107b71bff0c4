"""How a worker record is shown: up/down, slots, generations, lag (pure functions), and
:func:`load_views`, which reads the records to show (the routes of one type or one worker
call it; every worker's views are read through
:class:`~fleet.master.services.shared_views.SharedWorkerViews`, which the API, the
overview and the event hub share)."""

from __future__ import annotations

import asyncio
from typing import Any

from fleet.backends.base import Backend
from fleet.core import clock
from fleet.core.config_book import ConfigBook
from fleet.core.records import WorkerRecord
from fleet.core.redact import mask_credentials
from fleet.protocol import CONTROL_NS, drain_key

#: A worker is up while its last heartbeat is within this many heartbeat periods.
UP_HEARTBEATS = 3


def _int(raw: Any, default: int = 0) -> int:
    try:
        return int(float(raw))
    except (TypeError, ValueError):
        return default


def is_up(record: WorkerRecord, now: float, heartbeat_seconds: float) -> bool:
    """True if the worker reported within ``UP_HEARTBEATS`` heartbeats and is not STOPPED."""
    seen = record.last_seen
    if seen is None or record.state.get("state") == "STOPPED":
        return False
    return now - seen <= UP_HEARTBEATS * heartbeat_seconds


def worker_view(
    record: WorkerRecord, now: float, heartbeat_seconds: float, desired_gen: int = 0
) -> dict[str, Any]:
    """The JSON the API and dashboard show for one worker.

    Args:
        record: The backend's record.
        now: Current Unix time.
        heartbeat_seconds: The fleet's heartbeat period (for up/down).
        desired_gen: The generation of its stored config layers (a PATCH the worker
            has not merged yet shows as desired at once).

    Returns:
        ``{type, worker_id, state, up, last_seen, seen_ago, slots, gen, lagging,
        hardware, last_error, host, pid, started_at, version, tasks, browser_pools,
        unreadable}``;
        ``gen`` is ``{desired, applied}``, ``lagging`` is true when a live worker has
        not applied its desired generation yet, ``browser_pools`` is the stats frame's
        list of the worker's browser pools (empty without one), and ``unreadable``
        names the parts of the record whose stored value could not be read (shown empty).
    """
    state = record.state
    stats = record.stats or {}
    up = is_up(record, now, heartbeat_seconds)
    applied = _int(state.get("applied_gen"))
    desired = max(record.gen, desired_gen)
    raw_slots = stats.get("slots")
    slot_stats: dict[str, Any] = raw_slots if isinstance(raw_slots, dict) else {}
    seen = record.last_seen
    raw_pools = stats.get("browser_pools")
    pools = [p for p in raw_pools if isinstance(p, dict)] if isinstance(raw_pools, list) else []
    return {
        "type": record.automation_type,
        "worker_id": record.worker_id,
        "state": state.get("state", "UNKNOWN") if up else "DOWN",
        "reported_state": state.get("state"),
        "up": up,
        "last_seen": seen,
        "seen_ago": None if seen is None else max(0.0, now - seen),
        "slots": {
            "running": _int(state.get("slots")),
            "busy": _int(slot_stats.get("busy")),
            "total": _int(slot_stats.get("total"), _int(state.get("slots"))),
        },
        "gen": {"desired": desired, "applied": applied},
        "lagging": up and applied < desired,
        "hardware": record.hardware,
        "last_error": mask_credentials(state.get("last_error") or "") or None,
        "host": state.get("host") or record.hardware.get("host"),
        "pid": _int(state.get("pid"), _int(record.hardware.get("pid"))) or None,
        "started_at": state.get("started_at"),
        "version": state.get("version") or record.hardware.get("fleet_version"),
        "tasks": stats.get("tasks") if isinstance(stats.get("tasks"), dict) else {},
        "browser_pools": pools,
        # Only a worker that sizes the type's slots itself (slots: "auto") reports it.
        "autoslots": stats["autoslots"] if isinstance(stats.get("autoslots"), dict) else None,
        "unreadable": list(record.unreadable),
    }


def worker_counts(views: list[dict[str, Any]]) -> dict[str, int]:
    """``{total, up, lagging}`` of a list of worker views."""
    return {
        "total": len(views),
        "up": sum(1 for v in views if v["up"]),
        "lagging": sum(1 for v in views if v["lagging"]),
    }


async def load_views(
    backend: Backend, pairs: list[tuple[str, str]], heartbeat_seconds: float
) -> list[dict[str, Any]]:
    """Views of the ``(type, worker_id)`` pairs that still have a record."""
    now = clock.now()
    views = []
    ids: dict[str, list[str]] = {}
    for automation_type, wid in pairs:
        ids.setdefault(automation_type, []).append(wid)
    # Batched reads, not round trips per worker (1,000 workers in a view), and all
    # at once rather than one after another: the view waits for the slowest only.
    records, flags, found = await asyncio.gather(
        backend.workers.get_many(pairs),
        backend.kv.get_many(CONTROL_NS, [drain_key(t, wid) for t, wid in pairs]),
        asyncio.gather(*(backend.configs.book(t, wids) for t, wids in ids.items())),
    )
    books: dict[str, ConfigBook] = dict(zip(ids, found, strict=True))
    for (automation_type, wid), record, flag in zip(pairs, records, flags, strict=True):
        if record is not None:
            desired = books[automation_type].gen(wid)
            view = worker_view(record, now, heartbeat_seconds, desired)
            view["draining_requested"] = flag is not None
            views.append(view)
    return views
