"""Typed handles behind ``ctx.pool``, ``ctx.stream``, ``ctx.kv``, ``ctx.lock``,
``ctx.counter`` and ``ctx.events``. Each is a thin, validated layer over the one
backend capability it needs (:mod:`fleet.core.capabilities`); the same handles
serve workers, ``fleet run`` and tests."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel

from fleet.core.contracts import Pool, Stream, ensure_instance
from fleet.core.errors import ContractValueError
from fleet.core.records import PoolStrategy, StreamEntry, new_token

if TYPE_CHECKING:
    from fleet.core.capabilities import KV as KVStore
    from fleet.core.capabilities import Counters, Locks, Pools, Streams
    from fleet.core.capabilities import Events as EventBus

P = TypeVar("P", bound=BaseModel)
T = TypeVar("T", bound=BaseModel)
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class Entry(Generic[P]):
    """One stream entry with its payload validated into the stream's model."""

    id: str
    ts: float
    worker_id: str
    payload: P
    #: The task attempt that emitted it (None for a continuous automation's emits).
    task_id: str | None = None
    attempt: int | None = None


class StreamHandle(Generic[P]):
    """Typed reader of an automation's output stream (``ctx.stream(REF)``)."""

    def __init__(self, streams: Streams, ref: Stream[P]) -> None:
        self._streams = streams
        self.ref = ref

    def _typed(self, entries: list[StreamEntry]) -> list[Entry[P]]:
        model = self.ref.payload
        return [
            Entry(e.id, e.ts, e.worker_id, model.model_validate(e.payload), e.task_id, e.attempt)
            for e in entries
        ]

    async def pop(self, n: int = 1) -> list[Entry[P]]:
        """Remove and return the ``n`` oldest entries (competing consumers)."""
        return self._typed(await self._streams.pop(self.ref.name, n))

    async def peek(self, n: int = 10) -> list[Entry[P]]:
        """The ``n`` oldest entries, not removed."""
        return self._typed(await self._streams.peek(self.ref.name, n))

    async def read(self, after: str | None = None, n: int = 100) -> list[Entry[P]]:
        """Entries after the cursor ``after`` (an entry id), oldest first, not removed."""
        return self._typed(await self._streams.read(self.ref.name, after=after, n=n))

    async def length(self) -> int:
        """Number of entries in the stream."""
        return await self._streams.length(self.ref.name)


class ClaimedItem(Generic[P, T]):
    """A pool item held under an exclusive lease (yielded by ``claim``)."""

    def __init__(
        self,
        pools: Pools,
        pool: Pool[P, T],
        item_id: str,
        payload: P,
        tags: T,
        expires_at: float | None,
        token: str,
    ) -> None:
        self._pools = pools
        self._pool = pool
        self._token = token
        self.id = item_id
        self.payload = payload
        self.tags = tags
        self.expires_at = expires_at
        self.done = False

    async def release(self) -> bool:
        """Give the item back now; False if the lease was already lost."""
        if self.done:
            return False
        self.done = True
        return await self._pools.release(self._pool.name, self.id, self._token)

    async def evict(self) -> bool:
        """Remove the item from the pool for good; False if the lease was lost."""
        if self.done:
            return False
        self.done = True
        return await self._pools.evict(self._pool.name, self.id, self._token)

    async def extend(self, seconds: float) -> bool:
        """Hold the lease ``seconds`` from now; False if it was lost."""
        if self.done:
            return False
        return await self._pools.extend(self._pool.name, self.id, self._token, seconds)


class PoolHandle(Generic[P, T]):
    """Typed handle of a pool (``ctx.pool(REF)``); ``where`` narrows it by tags."""

    def __init__(self, pools: Pools, ref: Pool[P, T], where: dict[str, Any] | None = None):
        self._pools = pools
        self.ref = ref
        self._where = where or {}

    def where(self, **tags: Any) -> PoolHandle[P, T]:
        """A handle filtered by exact equality on tag fields.

        Raises:
            ContractValueError: (a ``ValueError``) for a field the tag model lacks.
        """
        self.ref.check_where(tags)
        encoded = {k: _jsonable(v) for k, v in tags.items()}
        return PoolHandle(self._pools, self.ref, {**self._where, **encoded})

    async def put(
        self, *, payload: P, tags: T, ttl_seconds: float | None = None, item_id: str | None = None
    ) -> str:
        """Add (or with ``item_id``, replace) an item; returns its id.

        Raises:
            ContractTypeError: (a ``TypeError``) if payload/tags are not the pool's models.
        """
        ensure_instance(payload, self.ref.payload, f"pool {self.ref.name!r} payload")
        ensure_instance(tags, self.ref.tags, f"pool {self.ref.name!r} tags")
        if ttl_seconds is not None and ttl_seconds <= 0:
            raise ContractValueError("ttl_seconds must be > 0", field="ttl_seconds")
        return await self._pools.put(
            self.ref.name,
            payload.model_dump(mode="json"),
            tags.model_dump(mode="json"),
            ttl_seconds=ttl_seconds,
            item_id=item_id,
        )

    @contextlib.asynccontextmanager
    async def claim(
        self, hold_seconds: float = 60.0, strategy: PoolStrategy = "freshest"
    ) -> AsyncIterator[ClaimedItem[P, T] | None]:
        """Claim one matching item for the block; yields None if none is claimable.
        The lease is released on leaving the block unless released/evicted."""
        if strategy not in ("freshest", "oldest", "random"):
            raise ContractValueError(f"unknown claim strategy {strategy!r}", field="strategy")
        claim = await self._pools.claim(
            self.ref.name, where=self._where or None, hold_seconds=hold_seconds, strategy=strategy
        )
        if claim is None:
            yield None
            return
        item = ClaimedItem(
            self._pools,
            self.ref,
            claim.item.id,
            self.ref.payload.model_validate(claim.item.payload),
            self.ref.tags.model_validate(claim.item.tags),
            claim.item.expires_at,
            claim.token,
        )
        try:
            yield item
        finally:
            if not item.done:
                await asyncio.shield(item.release())

    async def list(self, n: int = 50) -> list[tuple[str, P, T]]:
        """Up to ``n`` unclaimed, unexpired items as ``(id, payload, tags)``."""
        items = await self._pools.items(self.ref.name, where=self._where or None, n=n)
        return [
            (i.id, self.ref.payload.model_validate(i.payload), self.ref.tags.model_validate(i.tags))
            for i in items
        ]

    async def size(self) -> int:
        """Count of unclaimed, unexpired items (matching ``where``)."""
        return await self._pools.size(self.ref.name, where=self._where or None)

    async def remove(self, item_id: str) -> bool:
        """Remove an item whatever its claim; True if it existed."""
        return await self._pools.remove(self.ref.name, item_id)


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return json.loads(json.dumps(value, default=str))


def _encode(value: Any) -> str:
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, separators=(",", ":"))


class KV:
    """Namespaced key/value store with optional TTL (``ctx.kv(ns)``)."""

    def __init__(self, kv: KVStore, namespace: str) -> None:
        if not namespace or not isinstance(namespace, str):
            raise ContractValueError("kv namespace must be a non-empty string", field="namespace")
        self._kv = kv
        self.namespace = namespace

    async def set(self, key: str, value: Any, ttl_seconds: float | None = None) -> None:
        """Store a JSON-able value or a pydantic model."""
        await self._kv.set(self.namespace, key, _encode(value), ttl_seconds=ttl_seconds)

    async def setnx(self, key: str, value: Any, ttl_seconds: float | None = None) -> bool:
        """Store only if absent; True if stored."""
        return await self._kv.setnx(self.namespace, key, _encode(value), ttl_seconds=ttl_seconds)

    async def get(self, key: str, default: Any = None) -> Any:
        """The decoded JSON value, or ``default``."""
        raw = await self._kv.get(self.namespace, key)
        return default if raw is None else json.loads(raw)

    async def get_as(self, key: str, model: type[M]) -> M | None:
        """The value validated into ``model``, or None if absent."""
        raw = await self._kv.get(self.namespace, key)
        return None if raw is None else model.model_validate_json(raw)

    async def delete(self, key: str) -> bool:
        """Delete; True if a value existed."""
        return await self._kv.delete(self.namespace, key)


class Counter:
    """An atomic fleet-wide integer (``ctx.counter(name)``)."""

    def __init__(self, counters: Counters, name: str) -> None:
        self._counters = counters
        self.name = name

    async def incr(self, n: int = 1) -> int:
        return await self._counters.incr(self.name, n)

    async def decr(self, n: int = 1) -> int:
        return await self._counters.incr(self.name, -n)

    async def get(self) -> int:
        return await self._counters.get(self.name)

    async def set(self, value: int) -> None:
        await self._counters.set(self.name, value)

    async def reset(self) -> None:
        await self._counters.delete(self.name)


class Lock:
    """A fleet-wide mutex (``ctx.lock(name, hold_seconds, wait_seconds)``).

    ``async with`` yields True once acquired (False after ``wait_seconds``);
    while the block runs the lock is renewed every ``hold_seconds / 3``, and on
    exit it is released only if this holder still owns it.
    """

    def __init__(
        self, locks: Locks, name: str, hold_seconds: float = 30.0, wait_seconds: float = 10.0
    ) -> None:
        if hold_seconds <= 0:
            raise ContractValueError("hold_seconds must be > 0", field="hold_seconds")
        if wait_seconds < 0:
            raise ContractValueError("wait_seconds must be >= 0", field="wait_seconds")
        self._locks = locks
        self.name = name
        self.hold_seconds = hold_seconds
        self.wait_seconds = wait_seconds
        self._token = new_token()
        self._renewer: asyncio.Task[None] | None = None
        self.acquired = False

    async def acquire(self) -> bool:
        """Try until ``wait_seconds`` pass; True if acquired."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_seconds
        delay = 0.01
        while True:
            if await self._locks.acquire(self.name, self._token, self.hold_seconds):
                self.acquired = True
                self._renewer = asyncio.create_task(self._renew(), name=f"lock:{self.name}")
                return True
            left = deadline - loop.time()
            if left <= 0:
                return False
            await asyncio.sleep(min(delay, left))
            delay = min(delay * 2, 0.5)

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.hold_seconds / 3)
            if not await self._locks.renew(self.name, self._token, self.hold_seconds):
                self.acquired = False
                return

    async def release(self) -> bool:
        """Release if still held by this holder."""
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer
            self._renewer = None
        if not self.acquired:
            return False
        self.acquired = False
        return await self._locks.release(self.name, self._token)

    async def __aenter__(self) -> bool:
        return await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.shield(self.release())


class Events:
    """Fire-and-forget pub/sub of small JSON messages (``ctx.events``)."""

    def __init__(self, events: EventBus) -> None:
        self._events = events

    async def publish(self, topic: str, message: Any = None) -> None:
        """Deliver ``message`` to every current subscriber of ``topic``."""
        if isinstance(message, BaseModel):
            message = message.model_dump(mode="json")
        await self._events.publish(topic, message)

    async def subscribe(self, *topics: str) -> AsyncIterator[Any]:
        """Yield messages published to ``topics`` from now on (the message only;
        use :meth:`subscribe_with_topic` to also get the topic)."""
        async for _topic, message in self.subscribe_with_topic(*topics):
            yield message

    async def subscribe_with_topic(self, *topics: str) -> AsyncIterator[tuple[str, Any]]:
        """Yield ``(topic, message)`` pairs published to ``topics`` from now on."""
        if not topics:
            raise ContractValueError("subscribe needs at least one topic", field="topics")
        sub = await self._events.subscribe(*topics)
        try:
            async for item in sub:
                yield item
        finally:
            await sub.aclose()
