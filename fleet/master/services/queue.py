"""A type's dead letters and output stream as the REST API serves them (task bodies
with their secrets masked)."""

from __future__ import annotations

from typing import Any

from fleet.backends.base import Backend
from fleet.master.services.catalog import require_entry
from fleet.master.services.secrets import mask_task


async def dead_letters(backend: Backend, automation_type: str, n: int) -> list[dict[str, Any]]:
    """The ``n`` oldest dead-lettered bodies, secrets masked; 404 for an unknown type."""
    await require_entry(backend, automation_type)
    return [
        mask_task(body.to_dict()) for body in await backend.queues.dead_peek(automation_type, n)
    ]


async def replay(
    backend: Backend, automation_type: str, n: int | None, task_ids: list[str] | None
) -> int:
    """Re-enqueue dead tasks (those named, else the ``n`` oldest, else all); how many.
    An empty list of ids selects nothing, never "all"."""
    await require_entry(backend, automation_type)
    if task_ids is not None and not task_ids:
        return 0
    return await backend.queues.dead_replay(automation_type, n=n, task_ids=task_ids)


async def drain_dead(backend: Backend, automation_type: str) -> int:
    """Remove every dead-lettered task of the type; how many."""
    await require_entry(backend, automation_type)
    return await backend.queues.dead_clear(automation_type)


async def output(
    backend: Backend, automation_type: str, n: int, *, newest: bool
) -> list[dict[str, Any]]:
    """The ``n`` oldest (or, with ``newest``, the ``n`` newest) output entries, in
    time order, not removed."""
    await require_entry(backend, automation_type)
    read = backend.streams.tail if newest else backend.streams.peek
    return [e.to_dict() for e in await read(automation_type, n)]


async def pop_output(backend: Backend, automation_type: str, n: int) -> list[dict[str, Any]]:
    """Remove and return the ``n`` oldest output entries."""
    await require_entry(backend, automation_type)
    return [e.to_dict() for e in await backend.streams.pop(automation_type, n)]
