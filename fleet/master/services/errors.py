"""A type's error groups and their snapshots as the API shows them (docs/errors.md):
pages newest first, one group in full, a snapshot's bodies. 404 for an unknown type, an
unknown group or snapshot; a bad cursor is a 422 naming it."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fleet.backends.base import Backend
from fleet.core.error_groups import ErrorGroup, Snapshot, SnapshotMeta
from fleet.core.errors import NotFound
from fleet.master.services.catalog import require_entry


def snapshot_out(meta: SnapshotMeta) -> dict[str, Any]:
    """A snapshot's description (every field of it)."""
    return asdict(meta)


def group_out(g: ErrorGroup, *, full: bool = False) -> dict[str, Any]:
    """A group (``full``: with its sample's traceback and its snapshots)."""
    out: dict[str, Any] = {
        "group": g.group,
        "exception": g.exc,
        "message": g.message,
        "location": g.location,
        "count": g.count,
        "first_seen": g.first_seen,
        "last_seen": g.last_seen,
        "domains": list(g.domains),
        "sample_task_id": g.sample.task_id or None,
        "sample_message": g.sample.message,
    }
    if full:
        out["traceback"] = g.sample.traceback
        out["snapshots"] = [snapshot_out(s) for s in g.snapshots]
    return out


async def page(
    backend: Backend, automation_type: str, *, cursor: str | None, limit: int
) -> dict[str, Any]:
    """A page of the type's groups, newest last seen first."""
    await require_entry(backend, automation_type)
    got = await backend.errors.page(automation_type, cursor=cursor, limit=limit)
    return {
        "type": automation_type,
        "items": [group_out(g) for g in got.items],
        "cursor": got.cursor,
    }


async def one(backend: Backend, automation_type: str, group: str) -> dict[str, Any]:
    """One group in full (404 if unknown or gone)."""
    await require_entry(backend, automation_type)
    got = await backend.errors.get(automation_type, group)
    if got is None:
        raise NotFound(
            f"no error group {group!r} in {automation_type!r} (unknown, or gone 7 days "
            "after it was last seen)",
            resource="error group",
            key=group,
        )
    return group_out(got, full=True)


async def snapshot(
    backend: Backend, automation_type: str, group: str, snapshot_id: str, part: str
) -> bytes:
    """The ``part`` (``html`` or ``screenshot``) of one snapshot (404 if it has none)."""
    await require_entry(backend, automation_type)
    snap: Snapshot | None = await backend.errors.snapshot(automation_type, group, snapshot_id)
    body = None if snap is None else snap.html if part == "html" else snap.png
    if body is None:
        raise NotFound(
            f"no {part} of snapshot {snapshot_id!r} in error group {group!r}",
            resource="snapshot",
            key=snapshot_id,
        )
    return body
