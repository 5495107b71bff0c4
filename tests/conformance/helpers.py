"""Small builders shared by the conformance tests (they use only the Backend API)."""

from __future__ import annotations

import asyncio
from typing import Any

from fleet.backends.base import Backend
from fleet.backends.redis.backend import RedisBackend
from fleet.backends.sqlite import SQLiteBackend
from fleet.core.clock import ManualClock
from fleet.core.records import PushRequest, Reservation, TaskBody, new_id, now
from tests.support.waits import until

TYPE = "conf-type"
#: Short lease used where a test lets leases run out.
SHORT = 0.3


async def elapse(backend: Backend, clock: ManualClock, seconds: float) -> None:
    """Let ``seconds`` pass for ``backend``: the stopped clock moves; a Redis key's own
    TTL (``PX``, ``EXPIRE``) is kept by Redis, so on Redis real time passes too."""
    clock.advance(seconds)
    if isinstance(backend, RedisBackend):
        await asyncio.sleep(seconds)


async def waiting_reserves(backend: Backend, type_: str = TYPE) -> int:
    """How many reserves wait in ``backend``: on SQLite its watcher's waiters of
    ``type_``, on Redis the clients blocked in ``BLPOP`` (of any type)."""
    if isinstance(backend, RedisBackend):
        return int((await backend._r.info("clients"))["blocked_clients"])
    assert isinstance(backend, SQLiteBackend), backend
    return len(backend._watcher._waiters.get(type_, []))


async def blocked(backend: Backend, n: int = 1, type_: str = TYPE) -> None:
    """Until ``n`` reserves wait in ``backend`` (started, found nothing, now blocked)."""

    async def enough() -> bool:
        return await waiting_reserves(backend, type_) >= n

    await until(enough, what=f"{n} blocked reserves")


def body(
    task_id: str | None = None,
    *,
    payload: Any = None,
    priority: int = 0,
    max_attempts: int | None = None,
    ttl_seconds: float | None = None,
) -> TaskBody:
    return TaskBody(
        id=task_id or new_id(),
        payload={"n": 1} if payload is None else payload,
        priority=priority,
        max_attempts=max_attempts,
        enqueued_at=now(),
        ttl_seconds=ttl_seconds,
    )


def req(task_id: str | None = None, **kw: Any) -> PushRequest:
    delay = kw.pop("delay_seconds", 0.0)
    key = kw.pop("idempotency_key", None)
    ttl = kw.pop("idempotency_ttl", 86_400.0)
    return PushRequest(body(task_id, **kw), delay, key, ttl)


async def push(backend: Backend, *ids: str, type_: str = TYPE, **kw: Any) -> None:
    results = await backend.queues.push(type_, [req(i, **kw) for i in ids])
    assert all(r.queued for r in results), results


async def reserve_ids(backend: Backend, k: int = 1, type_: str = TYPE, **kw: Any) -> list[str]:
    return [r.body.id for r in await backend.queues.reserve(type_, k=k, **kw)]


async def reserve_one(backend: Backend, type_: str = TYPE, **kw: Any) -> Reservation:
    got = await backend.queues.reserve(type_, k=1, **kw)
    assert len(got) == 1, got
    return got[0]


async def drain(backend: Backend, type_: str = TYPE, **kw: Any) -> list[str]:
    """Reserve (and ack) everything pending; returns ids in reserve order."""
    out: list[str] = []
    while True:
        got = await backend.queues.reserve(type_, k=50, **kw)
        if not got:
            return out
        out += [r.body.id for r in got]
        assert all(await backend.queues.ack(type_, [(r.body.id, r.token) for r in got]))
