"""``memory://<name>``: the whole backend in one process, for ``fleet run`` and tests.

A real backend with the same semantics as Redis and SQLite (the conformance
suite proves it), not a mock. State lives in a named :class:`MemoryStore`
shared by every open of the same URL in the process; it keeps its data after
the last ``close`` (like a file) until :func:`fleet.backends.memory.store.drop_store`,
so give each independent run its own name. Each operation runs
without awaiting in the middle, so it is atomic under asyncio; a blocked
``reserve`` waits on a future woken by pushes, releases, sweeps and replays, and
sleeps no longer than until the next scheduled task comes due.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import Sequence
from typing import Any

from fleet.backends.base import (
    STREAM_MAX_AGE,
    STREAM_MAX_LEN,
    Backend,
    Subscription,
)
from fleet.backends.memory.browse import MemoryBrowse
from fleet.backends.memory.configs import MemoryConfigs
from fleet.backends.memory.events import MemorySubscription
from fleet.backends.memory.history import MemoryHistory
from fleet.backends.memory.limits import MemoryLimits
from fleet.backends.memory.proxies import MemoryProxies
from fleet.backends.memory.records import MemoryRecordsMixin
from fleet.backends.memory.runs import MemoryRuns
from fleet.backends.memory.schedules import MemorySchedules
from fleet.backends.memory.store import get_store, store_name
from fleet.backends.memory.wait import resolve
from fleet.core.capabilities.proxies import ProxyPolicy
from fleet.core.capabilities.queues import Taken
from fleet.core.errors import ContractValueError
from fleet.core.flow import GroupInfo, GroupLimits, GroupPage, GroupSettings
from fleet.core.records import (
    CancelOutcome,
    LeaseStatus,
    NackOutcome,
    PoolClaim,
    PoolItem,
    PoolStats,
    PoolStrategy,
    PushRequest,
    PushResult,
    QueueDepths,
    Reservation,
    StreamEntry,
    TaskBody,
    TaskInfo,
    dumps,
    new_token,
    now,
)
from fleet.core.results import output_record, progress_record, progress_topic
from fleet.protocol import emit_topic


def _json(value: Any) -> Any:
    return json.loads(dumps(value))


class MemoryBackend(
    MemoryRecordsMixin,
    Backend,
):
    """In-process backend over the store named by ``memory://<name>``.

    Args:
        url: ``memory://`` (the store ``default``) or ``memory://<name>``.
    """

    #: A take is one synchronous step: a cancel cannot cut it after it took tasks.
    take_outlives_cancel = False

    def __init__(self, url: str) -> None:
        self.url = url
        self._store = get_store(store_name(url))
        self.configs = MemoryConfigs(self._store)
        self.limits = MemoryLimits(self._store.limits)
        self.history = MemoryHistory(self._store.history, self._store.queue_counters)
        self.proxies = MemoryProxies(self._store.proxies, self._proxy_policy)
        self.proxies.salts = self
        self.schedules = MemorySchedules(self._store.schedules)
        self.runs = MemoryRuns(self._store.runs)
        self.browse = MemoryBrowse(self._store)
        self._closed = False
        self._waiting: set[asyncio.Future[None]] = set()
        # Weak: a subscription closed by its user must not be kept alive here.
        self._subs: weakref.WeakSet[MemorySubscription] = weakref.WeakSet()

    # ------------------------------------------------------------ lifecycle
    async def connect(self) -> None:
        self._closed = False

    async def close(self) -> None:
        self._closed = True
        for fut in list(self._waiting):
            resolve(fut)
        for sub in list(self._subs):
            sub.close()
        self._subs.clear()

    async def ping(self) -> bool:
        return not self._closed

    # ------------------------------------------------------------ task queues
    async def push(self, automation_type: str, requests: Sequence[PushRequest]) -> list[PushResult]:
        await asyncio.sleep(0)  # a yield point, as every networked backend has
        reqs = [r if _plain(r.body) else _copied(r) for r in requests]
        return self._store.queue(automation_type).state.push(reqs, now())

    async def _take(
        self,
        automation_type: str,
        k: int,
        visibility_seconds: float,
        default_max_attempts: int,
    ) -> Taken:
        await asyncio.sleep(0)
        queue = self._store.queue(automation_type)
        t = now()
        expired: list[TaskBody] = []
        taken = queue.state.take(k, visibility_seconds, default_max_attempts, t, expired)
        dropped = tuple((b.id, t - b.enqueued_at, b.ttl_seconds) for b in expired)
        return Taken([_delivered(r) for r in taken], queue.state.next_due(), expired=dropped)

    async def _wait_for_work(self, automation_type: str, signal: int, seconds: float) -> bool:
        queue = self._store.queue(automation_type)
        fut = queue.waiters.add()
        self._waiting.add(fut)
        try:
            done, _ = await asyncio.wait((fut,), timeout=seconds)
            return bool(done)
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                queue.waiters.wake(1)  # hand the wake-up we consumed to another reserver
            raise
        finally:
            self._waiting.discard(fut)
            queue.waiters.discard(fut)
            if not fut.done():
                fut.cancel()

    async def ack(self, automation_type: str, leases: Sequence[tuple[str, str]]) -> list[bool]:
        await asyncio.sleep(0)
        return self._store.queue(automation_type).state.ack(leases, now())

    async def nack(
        self,
        automation_type: str,
        task_id: str,
        token: str,
        *,
        delay_seconds: float,
        error: str | None = None,
        traceback: str | None = None,
        dead: bool = False,
    ) -> NackOutcome:
        return self._store.queue(automation_type).state.nack(
            task_id,
            token,
            delay_seconds=delay_seconds,
            error=error,
            traceback=traceback,
            dead=dead,
            now=now(),
        )

    async def release(self, automation_type: str, task_id: str, token: str) -> bool:
        return self._store.queue(automation_type).state.release(task_id, token)

    async def extend(
        self, automation_type: str, task_id: str, token: str, visibility_seconds: float
    ) -> LeaseStatus:
        return self._store.queue(automation_type).state.extend(
            task_id, token, visibility_seconds, now()
        )

    async def mark_started(
        self, automation_type: str, leases: Sequence[tuple[str, str]]
    ) -> list[bool]:
        return self._store.queue(automation_type).state.mark_started(leases, now())

    async def sweep(self, automation_type: str) -> int:
        return self._store.queue(automation_type).state.sweep(now())

    async def dead_peek(self, automation_type: str, n: int = 50) -> list[TaskBody]:
        return [_delivered_body(b) for b in self._store.queue(automation_type).state.dead_peek(n)]

    async def dead_replay(
        self, automation_type: str, *, n: int | None = None, task_ids: Sequence[str] | None = None
    ) -> int:
        return self._store.queue(automation_type).state.dead_replay(n, task_ids)

    async def dead_clear(self, automation_type: str) -> int:
        return self._store.queue(automation_type).state.dead_clear()

    async def depths(self, automation_type: str) -> QueueDepths:
        return self._store.queue(automation_type).state.depths(now())

    async def task_state(self, automation_type: str, task_id: str) -> TaskInfo:
        return self._store.queue(automation_type).state.task_state(task_id, now())

    async def cancel(self, automation_type: str, task_id: str) -> CancelOutcome:
        return self._store.queue(automation_type).state.cancel(task_id, now())

    # ------------------------------------------------------------ task groups
    async def throttle(
        self, automation_type: str, task_id: str, token: str, *, retry_after: float
    ) -> bool:
        await asyncio.sleep(0)
        return self._store.queue(automation_type).state.throttle(task_id, token, retry_after, now())

    async def group_list(
        self, automation_type: str, *, after: str | None = None, limit: int = 1000
    ) -> GroupPage:
        await asyncio.sleep(0)
        return self._store.queue(automation_type).state.groups.page(after, limit, now())

    async def group_info(self, automation_type: str, group: str) -> GroupInfo:
        await asyncio.sleep(0)
        book = self._store.queue(automation_type).state.groups
        found = book.groups.get(group)
        if found is None:
            return GroupInfo(group, 0, 0, None, None)
        return book.info(found, now())

    async def group_set(self, automation_type: str, group: str, settings: GroupSettings) -> None:
        await self._configure_group(automation_type, group, settings)

    async def group_reset(self, automation_type: str, group: str) -> None:
        await self._configure_group(automation_type, group, None)

    async def group_defaults_set(
        self,
        automation_type: str,
        limits: GroupLimits,
        *,
        gen: int,
        proxy: ProxyPolicy | None = None,
    ) -> bool:
        await asyncio.sleep(0)
        queue = self._store.queue(automation_type)
        stored, woke = queue.state.groups.set_defaults(limits, gen, proxy)
        if woke:
            queue.state.on_ready(woke)
        return stored

    async def group_defaults(self, automation_type: str) -> tuple[GroupLimits, int]:
        await asyncio.sleep(0)
        book = self._store.queue(automation_type).state.groups
        return book.defaults, book.defaults_gen

    def _proxy_policy(self, automation_type: str) -> tuple[ProxyPolicy | None, int]:
        """The type's stored proxy policy and its generation (``(None, -1)``: none),
        read without creating the type's queue (a proxy call may name a type that
        never stored anything)."""
        queue = self._store.queues.get(automation_type)
        if queue is None:
            return None, -1
        return queue.state.groups.proxy, queue.state.groups.defaults_gen

    async def _configure_group(
        self, automation_type: str, group: str, settings: GroupSettings | None
    ) -> None:
        await asyncio.sleep(0)
        queue = self._store.queue(automation_type)
        if queue.state.groups.configure(group, settings, now()):
            queue.state.on_ready(1)

    async def purge_type(self, automation_type: str) -> None:
        store = self._store
        queue = store.queues.get(automation_type)
        if queue is not None:
            queue.state.reset()
        store.streams.pop(automation_type, None)
        store.schedules.purge_type(automation_type)
        store.catalog.pop(automation_type, None)
        store.config.pop(automation_type, None)
        store.generations.pop(automation_type, None)
        for key in [k for k in store.overrides if k[0] == automation_type]:
            del store.overrides[key]
        for gen_key in [k for k in store.config_gens if k[0] == automation_type]:
            del store.config_gens[gen_key]
        for wid in list(store.worker_index.get(automation_type, ())):
            store.forget_worker(automation_type, wid)
        for key in [k for k in store.workers if k[0] == automation_type]:
            store.forget_worker(*key)

    # ------------------------------------------------------------ streams
    async def stream_push(
        self,
        automation_type: str,
        payload: Any,
        *,
        worker_id: str,
        max_len: int = STREAM_MAX_LEN,
        max_age: float = STREAM_MAX_AGE,
        task_id: str | None = None,
        attempt: int | None = None,
    ) -> StreamEntry:
        entry = self._store.stream(automation_type).push(
            payload,
            worker_id=worker_id,
            now=now(),
            max_len=max_len,
            max_age=max_age,
            task_id=task_id,
            attempt=attempt,
        )
        if task_id is not None:
            output = output_record(entry.id, entry.ts, attempt, entry.payload)
            self._store.queue(automation_type).state.record_output(task_id, output, entry.ts)
        self._store.hub.publish(emit_topic(automation_type), entry.to_dict())
        return entry

    async def task_progress(
        self,
        automation_type: str,
        task_id: str,
        *,
        attempt: int,
        fraction: float | None,
        message: str | None,
    ) -> None:
        t = now()
        progress = progress_record(fraction, message, attempt, t)
        self._store.queue(automation_type).state.record_progress(task_id, progress, t)
        self._store.hub.publish(progress_topic(automation_type), {"task_id": task_id, **progress})

    async def stream_pop(self, automation_type: str, n: int = 1) -> list[StreamEntry]:
        await asyncio.sleep(0)
        return self._store.stream(automation_type).pop(n)

    async def stream_peek(self, automation_type: str, n: int = 10) -> list[StreamEntry]:
        return self._store.stream(automation_type).peek(n)

    async def stream_read(
        self, automation_type: str, *, after: str | None = None, n: int = 100
    ) -> list[StreamEntry]:
        return self._store.stream(automation_type).read(after, n)

    async def stream_tail(self, automation_type: str, n: int = 20) -> list[StreamEntry]:
        return self._store.stream(automation_type).tail(n)

    async def stream_len(self, automation_type: str) -> int:
        return len(self._store.stream(automation_type))

    # ------------------------------------------------------------ pools
    async def pool_put(
        self,
        name: str,
        payload: Any,
        tags: dict[str, Any],
        *,
        ttl_seconds: float | None = None,
        item_id: str | None = None,
    ) -> str:
        return self._store.pool(name).put(
            payload, tags, ttl_seconds=ttl_seconds, item_id=item_id, now=now()
        )

    async def pool_claim(
        self,
        name: str,
        *,
        where: dict[str, Any] | None = None,
        hold_seconds: float = 60.0,
        strategy: PoolStrategy = "freshest",
    ) -> PoolClaim | None:
        if strategy not in ("freshest", "oldest", "random"):
            raise ContractValueError(f"unknown claim strategy {strategy!r}", field="strategy")
        await asyncio.sleep(0)
        return self._store.pool(name).claim(where, hold_seconds, strategy, now(), new_token())

    async def pool_release(self, name: str, item_id: str, token: str) -> bool:
        return self._store.pool(name).release(item_id, token, now())

    async def pool_evict(self, name: str, item_id: str, token: str) -> bool:
        return self._store.pool(name).evict(item_id, token, now())

    async def pool_extend(self, name: str, item_id: str, token: str, hold_seconds: float) -> bool:
        return self._store.pool(name).extend(item_id, token, hold_seconds, now())

    async def pool_list(
        self, name: str, *, where: dict[str, Any] | None = None, n: int = 50
    ) -> list[PoolItem]:
        return self._store.pool(name).available(where, n, now())

    async def pool_size(self, name: str, *, where: dict[str, Any] | None = None) -> int:
        return self._store.pool(name).size(where, now())

    async def pool_remove(self, name: str, item_id: str) -> bool:
        return self._store.pool(name).remove(item_id, now())

    async def pool_prune(self, name: str) -> int:
        pool = self._store.pools.get(name)
        return 0 if pool is None else pool.maintain(now())

    async def pool_names(self) -> list[str]:
        t = now()
        names = []
        for name, pool in self._store.pools.items():
            pool.maintain(t)
            if pool.items:
                names.append(name)
        return sorted(names)

    async def pool_stats(self, name: str) -> PoolStats:
        pool = self._store.pools.get(name)
        if pool is None:
            return PoolStats(name=name, total=0, available=0, claimed=0, expiring_soon=0)
        return pool.stats(now())

    async def pool_drop(self, name: str) -> int:
        pool = self._store.pools.pop(name, None)
        if pool is None:
            return 0
        pool.maintain(now())
        return len(pool.items)

    # ------------------------------------------------------------ events
    async def publish(self, topic: str, message: Any) -> None:
        self._store.hub.publish(topic, message)

    async def subscribe(self, *topics: str) -> Subscription:
        if not topics:
            raise ContractValueError("subscribe needs at least one topic", field="topics")
        sub = self._store.hub.subscribe(tuple(topics))
        self._subs.add(sub)
        return sub


# ------------------------------------------------------------ copies
# Bodies cross the boundary as JSON copies, as with every real backend, so a
# caller that mutates a payload never mutates the stored task.


def _plain(body: TaskBody) -> bool:
    return body.payload is None or isinstance(body.payload, str | int | float | bool)


def _copied(req: PushRequest) -> PushRequest:
    body = req.body.evolve(payload=_json(req.body.payload))
    return PushRequest(
        body, req.delay_seconds, req.idempotency_key, req.idempotency_ttl, req.unique_key
    )


def _delivered_body(body: TaskBody) -> TaskBody:
    return body if _plain(body) else body.evolve(payload=_json(body.payload))


def _delivered(res: Reservation) -> Reservation:
    return Reservation(_delivered_body(res.body), res.token, res.deadline)
