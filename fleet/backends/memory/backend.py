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

from fleet.backends.base import Backend, namespace_of
from fleet.backends.memory.browse import MemoryBrowse
from fleet.backends.memory.configs import MemoryConfigs
from fleet.backends.memory.events import MemoryEvents
from fleet.backends.memory.groups import MemoryGroups
from fleet.backends.memory.history import MemoryHistory
from fleet.backends.memory.limits import MemoryLimits
from fleet.backends.memory.pools import MemoryPools
from fleet.backends.memory.primitives import MemoryCounters, MemoryKV, MemoryLocks
from fleet.backends.memory.proxies import MemoryProxies
from fleet.backends.memory.queues import MemoryQueues
from fleet.backends.memory.runs import MemoryRuns
from fleet.backends.memory.schedules import MemorySchedules
from fleet.backends.memory.state import MemoryCatalog, MemoryWorkers
from fleet.backends.memory.store import get_store, store_name
from fleet.backends.memory.streams import MemoryStreams


class MemoryBackend(Backend):
    """In-process backend over the store named by ``memory://<name>``.

    Args:
        url: ``memory://`` (the store ``default``) or ``memory://<name>``.
    """

    queues: MemoryQueues
    events: MemoryEvents

    def __init__(self, url: str) -> None:
        self.url = url
        bare, namespace = namespace_of(url)
        # A namespace is a store of its own: nothing of one is seen from another.
        name = store_name(bare)
        store = self._store = get_store(f"{name}@{namespace}" if namespace else name)
        self.queues = MemoryQueues(store)
        self.groups = MemoryGroups(store)
        self.streams = MemoryStreams(store)
        self.pools = MemoryPools(store)
        self.kv = MemoryKV(store)
        self.locks = MemoryLocks(store)
        self.counters = MemoryCounters(store)
        self.events = MemoryEvents(store.hub)
        self.catalog = MemoryCatalog(store)
        self.workers = MemoryWorkers(store)
        self.configs = MemoryConfigs(store)
        self.limits = MemoryLimits(store.limits)
        self.history = MemoryHistory(store.history, store.queue_counters)
        self.proxies = MemoryProxies(store.proxies, self.groups.proxy_policy)
        self.proxies.salts = self.kv
        self.schedules = MemorySchedules(store.schedules)
        self.runs = MemoryRuns(store.runs)
        self.browse = MemoryBrowse(store)
        self._closed = False

    async def connect(self) -> None:
        self._closed = False
        self.queues.open()

    async def close(self) -> None:
        self._closed = True
        self.queues.close()
        self.events.close()

    async def ping(self) -> bool:
        return not self._closed

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
