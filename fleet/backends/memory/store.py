"""The named stores behind ``memory://<name>`` URLs.

Every open of the same URL in one process shares one :class:`MemoryStore`, so a
worker, a master and a test in one process see the same data; different names
are independent. A store lives until :func:`drop_store` (like a file that stays
after the last connection closes).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from fleet.backends.memory.events import MemoryEventBus
from fleet.backends.memory.history import HistoryTable
from fleet.backends.memory.limits import LimitTable
from fleet.backends.memory.pool import PoolState
from fleet.backends.memory.proxies import ProxyTable
from fleet.backends.memory.queue import QueueState
from fleet.backends.memory.runs import RunBook
from fleet.backends.memory.schedules import ScheduleTable
from fleet.backends.memory.stream import StreamState
from fleet.backends.memory.wait import Waiters
from fleet.core.records import PushRequest, now


class TypeQueue:
    """A type's queue state plus the reservers blocked on it."""

    def __init__(self, automation_type: str = "", runs: RunBook | None = None) -> None:
        self.waiters = Waiters()
        self.state = QueueState(
            on_ready=self.waiters.wake,
            on_reschedule=self.waiters.wake_all,
            automation_type=automation_type,
            runs=runs,
        )


@dataclass(slots=True)
class WorkerData:
    """The ``wkr:<type>:<id>:*`` keys of one worker (JSON kept as text)."""

    hardware: str | None = None
    config: str | None = None
    gen: int = 0
    state: dict[str, str] = field(default_factory=dict)
    stats: str | None = None


class ExpiringValues:
    """String values with optional expiry, checked lazily and pruned on writes."""

    def __init__(self) -> None:
        self.values: dict[str, tuple[str, float | None]] = {}
        self._expiry: list[tuple[float, str]] = []

    def get(self, key: str, now: float) -> str | None:
        hit = self.values.get(key)
        if hit is None or (hit[1] is not None and hit[1] <= now):
            return None
        return hit[0]

    def set(self, key: str, value: str, ttl_seconds: float | None, now: float) -> None:
        self._prune(now)
        expires = None if ttl_seconds is None else now + ttl_seconds
        self.values[key] = (value, expires)
        if expires is not None:
            heapq.heappush(self._expiry, (expires, key))

    def delete(self, key: str, now: float) -> bool:
        live = self.get(key, now) is not None
        self.values.pop(key, None)
        return live

    def expires_at(self, key: str) -> float | None:
        hit = self.values.get(key)
        return None if hit is None else hit[1]

    def _prune(self, now: float) -> None:
        while self._expiry and self._expiry[0][0] <= now:
            exp, key = heapq.heappop(self._expiry)
            hit = self.values.get(key)
            if hit is not None and hit[1] == exp:
                del self.values[key]


class MemoryStore:
    """Everything one ``memory://<name>`` holds."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.queues: dict[str, TypeQueue] = {}
        self.streams: dict[str, StreamState] = {}
        self.pools: dict[str, PoolState] = {}
        self.hub = MemoryEventBus()
        self.kv = ExpiringValues()  # key: "<ns>\0<key>"
        self.locks = ExpiringValues()  # value: holder token
        self.counters: dict[str, int] = {}
        self.limits = LimitTable()
        self.history = HistoryTable()
        self.proxies = ProxyTable()
        self.schedules = ScheduleTable()
        self.catalog: dict[str, str] = {}
        self.workers: dict[tuple[str, str], WorkerData] = {}
        self.worker_index: dict[str, set[str]] = {}
        self.workers_all: set[tuple[str, str]] = set()
        self.config: dict[str, str] = {}
        self.overrides: dict[tuple[str, str], str] = {}
        self.generations: dict[str, int] = {}
        #: (type, worker id or "" for the type-wide config) -> its generation
        self.config_gens: dict[tuple[str, str], int] = {}
        self.runs = RunBook(self._push_callback, self._cancel_task, self.hub.publish)

    def _push_callback(self, automation_type: str, request: PushRequest) -> None:
        self.queue(automation_type).state.push([request], now())

    def _cancel_task(self, automation_type: str, task_id: str) -> str:
        return self.queue(automation_type).state.cancel(task_id, now())

    def queue(self, automation_type: str) -> TypeQueue:
        q = self.queues.get(automation_type)
        if q is None:
            q = self.queues[automation_type] = TypeQueue(automation_type, self.runs)
        return q

    def queue_counters(self, automation_type: str) -> dict[str, int]:
        """A type's queue counters (empty for a type without a queue; none is made)."""
        q = self.queues.get(automation_type)
        return {} if q is None else q.state.counters

    def stream(self, automation_type: str) -> StreamState:
        s = self.streams.get(automation_type)
        if s is None:
            s = self.streams[automation_type] = StreamState()
        return s

    def pool(self, name: str) -> PoolState:
        p = self.pools.get(name)
        if p is None:
            p = self.pools[name] = PoolState(name)
        return p

    def worker(self, automation_type: str, worker_id: str) -> WorkerData:
        key = (automation_type, worker_id)
        w = self.workers.get(key)
        if w is None:
            w = self.workers[key] = WorkerData()
        return w

    def forget_worker(self, automation_type: str, worker_id: str) -> None:
        self.workers.pop((automation_type, worker_id), None)
        ids = self.worker_index.get(automation_type)
        if ids is not None:
            ids.discard(worker_id)
            if not ids:
                del self.worker_index[automation_type]
        self.workers_all.discard((automation_type, worker_id))


_STORES: dict[str, MemoryStore] = {}


def store_name(url: str) -> str:
    """The store name of a ``memory://<name>`` URL (``default`` if empty)."""
    parts = urlsplit(url)
    return (parts.netloc + parts.path).strip("/") or "default"


def get_store(name: str) -> MemoryStore:
    """The process-wide store called ``name``, created on first use."""
    store = _STORES.get(name)
    if store is None:
        store = _STORES[name] = MemoryStore(name)
    return store


def drop_store(name: str) -> bool:
    """Forget the store called ``name`` (its data is gone); True if it existed."""
    return _STORES.pop(name, None) is not None
