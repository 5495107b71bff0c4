"""Helpers of the worker tests: waiting, running a worker, pushing config like the master."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fleet.backends.base import Backend
from fleet.core.automation import Automation
from fleet.core.backoff import RetryPolicy
from fleet.core.config import merge_config
from fleet.core.submission import make_push_request
from fleet.protocol import CONTROL_NS, drain_key
from fleet.worker.agent import Worker
from tests.support.waits import until

FAST_RETRY = RetryPolicy(base=0.02, cap=0.1)


async def wait_until(
    check: Callable[[], Awaitable[bool]] | Callable[[], bool],
    timeout: float = 10.0,
    interval: float = 0.02,
    what: str = "condition",
) -> None:
    """Poll ``check`` (sync or async) until it is true; fail after ``timeout``."""
    await until(check, timeout=timeout, interval=interval, what=what)


@asynccontextmanager
async def running_worker(
    backend: Backend,
    classes: Sequence[type[Automation[Any]]],
    worker_id: str = "w1",
    **kwargs: Any,
) -> AsyncIterator[Worker]:
    """A started worker; shut down gracefully on exit."""
    kwargs.setdefault("policy", FAST_RETRY)
    kwargs.setdefault("heartbeat_seconds", 0.2)
    kwargs.setdefault("grace", 2.0)
    worker = Worker(backend, classes, worker_id, **kwargs)
    task = asyncio.create_task(worker.run())
    await wait_until(lambda: bool(worker._loops) or task.done(), what="worker start")
    if task.done():
        task.result()
    try:
        yield worker
    finally:
        worker.request_stop()
        await asyncio.wait_for(task, 30)


async def push(backend: Backend, automation_type: str, *payloads: Any, **opts: Any) -> list[str]:
    results = await backend.queues.push(
        automation_type, [make_push_request(p, **opts) for p in payloads]
    )
    return [r.task_id for r in results]


async def push_config(
    backend: Backend, automation_type: str, patch: dict[str, Any], worker_ids: Sequence[str]
) -> int:
    """What the master does on PATCH of the type-wide config (docs/protocol.md): one
    write at the next generation; each of ``worker_ids`` merges it itself."""
    del worker_ids  # the master no longer writes each worker's desired config
    stored = merge_config(await backend.configs.get(automation_type), patch)
    gen = await backend.configs.publish(automation_type, stored)
    await backend.events.publish(f"config.{automation_type}", {"worker_id": None, "gen": gen})
    return gen


async def drain(backend: Backend, automation_type: str, worker_id: str, on: bool) -> None:
    """What the master does on a drain / resume request."""
    if on:
        await backend.kv.set(CONTROL_NS, drain_key(automation_type, worker_id), "true")
    else:
        await backend.kv.delete(CONTROL_NS, drain_key(automation_type, worker_id))
    await backend.events.publish(
        f"control.{automation_type}",
        {"worker_id": worker_id, "action": "drain" if on else "resume"},
    )


async def state_of(backend: Backend, automation_type: str, worker_id: str) -> dict[str, str]:
    record = await backend.workers.get(automation_type, worker_id)
    return record.state if record is not None else {}
