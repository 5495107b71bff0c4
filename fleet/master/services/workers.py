"""Workers as the REST API serves them: one worker with its configs (secrets masked),
drain and resume (a KV flag and a control event), forgetting a worker's records."""

from __future__ import annotations

from typing import Any, Literal

from fleet.backends.base import Backend
from fleet.core.config import merge_config
from fleet.core.config_book import desired_of
from fleet.core.errors import NotFound
from fleet.master.services.catalog import find_entry
from fleet.master.services.secrets import mask_config, mask_value
from fleet.master.services.workers_view import load_views
from fleet.protocol import CONTROL_NS, control_topic, drain_key

#: What an operator can tell one worker.
Control = Literal["drain", "resume"]


def _unknown(automation_type: str, worker_id: str) -> NotFound:
    return NotFound(
        f"unknown worker {worker_id!r} of {automation_type!r}",
        resource="worker",
        key=worker_id,
        automation_type=automation_type,
    )


async def worker_detail(
    backend: Backend, automation_type: str, worker_id: str, heartbeat_seconds: float
) -> dict[str, Any]:
    """One worker's view with its config: type-wide, its override, the merged result
    and its desired config (with its generation: what the worker wrote, or the newer
    layers it has not merged yet); secrets masked for
    every token (``GET .../config?reveal=true`` shows them to the admin).

    Raises:
        NotFound: 404 for a worker the type does not have.
    """
    views = await load_views(backend, [(automation_type, worker_id)], heartbeat_seconds)
    if not views:
        raise _unknown(automation_type, worker_id)
    book = await backend.configs.book(automation_type, [worker_id])
    type_wide, override = book.type_wide, book.override(worker_id)
    stored, stored_gen = await backend.configs.desired(automation_type, worker_id)
    desired, gen = desired_of(book, worker_id, stored, stored_gen)
    record = await backend.workers.get(automation_type, worker_id)
    entry = await find_entry(backend, automation_type) or {}
    schema = entry.get("config") if isinstance(entry.get("config"), dict) else {}
    configs = {
        "type_wide": type_wide,
        "override": override,
        "merged": merge_config(type_wide, override),
        "desired": desired,
    }
    return {
        **views[0],
        "config": {**{k: mask_config(v, schema) for k, v in configs.items()}, "desired_gen": gen},
        "stats": mask_value(record.stats) if record is not None else None,
    }


async def control(backend: Backend, automation_type: str, worker_id: str, action: Control) -> None:
    """Drain a worker (stop taking tasks, finish in-flight ones) or resume it: the
    flag it reads at start, and the event it hears now.

    Raises:
        NotFound: 404 for a worker the type does not have.
    """
    if worker_id not in await backend.workers.ids(automation_type):
        raise _unknown(automation_type, worker_id)
    key = drain_key(automation_type, worker_id)
    if action == "drain":
        await backend.kv.set(CONTROL_NS, key, "true")
    else:
        await backend.kv.delete(CONTROL_NS, key)
    await backend.events.publish(
        control_topic(automation_type), {"worker_id": worker_id, "action": action}
    )


async def forget(backend: Backend, automation_type: str, worker_id: str) -> bool:
    """Delete the worker's records and its drain flag; whether it was known."""
    known = worker_id in await backend.workers.ids(automation_type)
    await backend.workers.forget(automation_type, worker_id)
    await backend.kv.delete(CONTROL_NS, drain_key(automation_type, worker_id))
    return known
