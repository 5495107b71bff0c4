"""The Redis backend (``redis://``, ``rediss://``, ``unix://``): what a fleet runs on.

Each capability is an object over the shared :class:`~fleet.backends.redis.core.RedisCore`
(connections, scripts), built here from the module of the same name:
:mod:`~fleet.backends.redis.queues`, :mod:`~fleet.backends.redis.groups`,
:mod:`~fleet.backends.redis.streams`, :mod:`~fleet.backends.redis.pools`,
:mod:`~fleet.backends.redis.primitives` (kv, locks, counters),
:mod:`~fleet.backends.redis.events`, :mod:`~fleet.backends.redis.state` (catalog,
workers), :mod:`~fleet.backends.redis.limits`, :mod:`~fleet.backends.redis.proxies`, ...
Key names come from :mod:`~fleet.backends.redis.keys`; the atomic steps are the
Lua scripts in ``fleet/backends/lua``. The key schema is ``docs/redis-schema.md``.
"""

from __future__ import annotations

import asyncio

from redis.exceptions import ResponseError

from fleet.backends.base import Backend
from fleet.backends.redis import keys
from fleet.backends.redis.browse import RedisBrowse
from fleet.backends.redis.configs import RedisConfigs
from fleet.backends.redis.core import CONNECT_TIMEOUT, RedisCore
from fleet.backends.redis.domains import RedisDomains
from fleet.backends.redis.errors import RedisErrors
from fleet.backends.redis.events import RedisEvents
from fleet.backends.redis.groups import RedisGroups
from fleet.backends.redis.history import RedisHistory
from fleet.backends.redis.identities import RedisIdentities
from fleet.backends.redis.limits import RedisLimits
from fleet.backends.redis.meters import RedisMeters
from fleet.backends.redis.pools import RedisPools
from fleet.backends.redis.primitives import RedisCounters, RedisKV, RedisLocks
from fleet.backends.redis.proxies import RedisProxies
from fleet.backends.redis.queues import RedisQueues
from fleet.backends.redis.runs import RedisRuns
from fleet.backends.redis.schedules import RedisSchedules
from fleet.backends.redis.state import RedisCatalog, RedisWorkers
from fleet.backends.redis.streams import RedisStreams
from fleet.backends.redis.webhooks import RedisWebhooks
from fleet.core.errors import BackendBusy, UnsupportedBackend
from fleet.core.records import now

__all__ = ["RedisBackend"]


class RedisBackend(RedisCore, Backend):
    """Backend over one Redis database.

    Args:
        url: ``redis://[[user]:password@]host[:port][/db]``, ``rediss://`` for TLS
            (``?ssl_cert_reqs=...`` etc. as redis-py accepts) or
            ``unix:///path/redis.sock?db=0``. Connection options may be given
            in the query string (e.g. ``socket_timeout=5``).

    Raises:
        UnsupportedBackend: The URL asks for Redis Sentinel or Cluster (not
            supported yet; a cluster-mode server is refused by :meth:`connect`).
        ConfigError: The URL cannot be read.
    """

    meters: RedisMeters
    errors: RedisErrors

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.queues = RedisQueues(self)
        self.groups = RedisGroups(self)
        self.streams = RedisStreams(self)
        self.pools = RedisPools(self)
        self.identities = RedisIdentities(self)
        self.domains = RedisDomains(self)
        self.meters = RedisMeters(self)
        self.errors = RedisErrors(self)
        self.kv = RedisKV(self)
        self.locks = RedisLocks(self)
        self.counters = RedisCounters(self)
        self.events = RedisEvents(self)
        self.catalog = RedisCatalog(self)
        self.workers = RedisWorkers(self)
        self.configs = RedisConfigs(self)
        self.schedules = RedisSchedules(self)
        self.runs = RedisRuns(self)
        self.browse = RedisBrowse(self)
        self.limits = RedisLimits(self)
        self.history = RedisHistory(self)
        self.proxies = RedisProxies(self)
        self.proxies.salts = self.kv
        self.webhooks = RedisWebhooks(self)

    async def connect(self) -> None:
        """Check the server answers and load every script (idempotent).

        Raises:
            BackendUnavailable: The server cannot be reached (or is loading its data).
            UnsupportedBackend: A redis:// URL names a node of a cluster.
        """
        self._closed = False
        with self._guard():
            await self._r.ping()
            cluster = self._cluster is None and await self._cluster_enabled()
        if cluster:
            await self._close_clients()
            raise UnsupportedBackend(
                f"redis at {self._safe_url} runs in cluster mode: name its nodes with "
                "redis+cluster://host:port[,host:port...] (a redis:// URL talks to one "
                "server and does not follow cluster redirections)"
            )
        with self._guard():
            await self._scripts.load_all(self._lane)

    async def _cluster_enabled(self) -> bool:
        # A plain redis:// URL may name a cluster node: its scripts would then fail
        # call by call with MOVED or CROSSSLOT; refuse it here, once, instead.
        try:
            info = await self._r.info("cluster")
        except ResponseError:  # INFO denied by an ACL: nothing to learn here
            return False
        return bool(int(info.get("cluster_enabled", 0)))

    async def close(self) -> None:
        await self._close_clients()

    async def ping(self) -> bool:
        # Over the script lane: a command pool full of this process's own calls would
        # delay the answer (and a probe timed out would read as an outage); a queue
        # that stayed full (BackendBusy) means the server answers, busily.
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                with self._guard():
                    return bool(await self._lane.execute("PING"))
        except BackendBusy:
            return True
        except Exception:
            return False

    async def purge_type(self, automation_type: str) -> None:
        t = automation_type
        with self._guard():
            for sid in await self.schedules.listing_raw(t):
                await self.schedules.delete(t, sid)
            doomed: list[str] = [
                *self._keys.queue_keys(t, now()),
                *self._keys.browse_indexes(t),
                self._keys.stream(t),
                self._keys.config(t),
                *self._keys.domain_keys(t)[:2],
                *self._keys.error_keys(t),
            ]
            doomed += [self._keys.config_generation(t), self._keys.config_generations(t)]
            patterns = (
                self._keys.idempotency_pattern(t),
                self._keys.config_override_pattern(t),
                self._keys.done_pattern(t),
                self._keys.task_record_pattern(t),
                self._keys.record_buckets_pattern(t),
                self._keys.group_lists_pattern(t),
            )
            for pattern in patterns:
                async for key in self._r.scan_iter(match=pattern, count=1000):
                    doomed.append(key)
            worker_ids = await self._r.smembers(self._keys.workers_index(t))
            for wid in worker_ids:
                doomed += [self._keys.worker_key(t, wid, p) for p in keys.WORKER_PARTS]
            async with self._pipeline(transaction=True) as pipe:
                for start in range(0, len(doomed), 500):
                    # As a raw command: a cluster pipeline queues it for its slot (the
                    # type's), where its unlink() would split it outside the pipeline.
                    pipe.execute_command("UNLINK", *doomed[start : start + 500])
                pipe.delete(self._keys.workers_index(t))
                if worker_ids:
                    pipe.srem(
                        self._keys.WORKERS_ALL,
                        *[self._keys.workers_all_member(t, w) for w in worker_ids],
                    )
                pipe.hdel(self._keys.CATALOG, t)
                await pipe.execute()
            # in their own slot on a cluster ({meters}): not in the type's pipeline
            await self.meters.purge_type(t)
