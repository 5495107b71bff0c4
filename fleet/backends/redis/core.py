"""Connections, error translation and shared state of the Redis backend.

Three ways to the server per backend instance:

* the *script lane*: one pipelined connection of our own RESP client
  (:mod:`fleet.backends.redis.resp`) that every Lua script call takes; the hot
  path of producers and workers is scripts only, and this client costs a
  fraction of redis-py's per call;
* the *command* pool: every ordinary command and script, with short socket
  timeouts so a vanished server surfaces as ``BackendUnavailable`` within
  seconds; a call past its connections waits for one (``queued.py``), and
  ``BackendBusy`` if none comes free in time;
* the *blocking* pool: only for ``BLPOP`` on wake-up lists, without a socket
  read timeout (a blocked call may legitimately wait for its whole timeout;
  each call is bounded by an asyncio deadline instead). Blocked reservers
  therefore never hold a command connection or delay anyone else's command.

Errors of all three are translated in one place, :func:`translate` (run by
the ``with self._guard():`` around every call): connection failures and the
error replies that mean "not now" become ``BackendUnavailable`` (the callers
that retry, retry), every other error reply or driver error a
``BackendError``; no redis-py, hiredis or socket exception leaves a public
method.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.client import NEVER_DECODE
from redis.exceptions import (
    ClusterDownError,
    InvalidResponse,
    MasterDownError,
    ReadOnlyError,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from fleet.backends import redact_url
from fleet.backends.base import namespace_of
from fleet.backends.redis import keys
from fleet.backends.redis.cluster import (
    ClusterLane,
    ClusterTarget,
    cluster_client,
    is_cluster_url,
    parse_cluster_url,
)
from fleet.backends.redis.keys import KeySpace
from fleet.backends.redis.queued import QueuedPool
from fleet.backends.redis.resp import Endpoint, Lane, ReplyError, RespClient, endpoint_from_url
from fleet.backends.redis.scripts import Scripts, scripts
from fleet.backends.redis.sentinel import (
    close_sentinels,
    is_sentinel_url,
    parse_sentinel_url,
    sentinel_client,
    sentinel_endpoint,
)
from fleet.core.errors import BackendError, BackendUnavailable, ConfigError, UnsupportedBackend

log = logging.getLogger("fleet.backends.redis")

#: Seconds to establish a TCP/TLS/unix connection before giving up.
CONNECT_TIMEOUT = 3.0
#: Seconds a non-blocking command may take before the server counts as gone.
COMMAND_TIMEOUT = 10.0
#: Extra seconds a blocking call may overrun its own timeout before it is
#: treated as a dead connection.
BLOCKING_GRACE = 5.0

#: Driver errors that mean the server cannot be used now: a refused, lost or
#: timed-out connection (OSError covers the script lane's ConnectionError and
#: TimeoutError, and ssl errors), redis-py's ConnectionError family (which holds
#: ``LOADING`` as BusyLoadingError, and refused AUTH), and a reply redis-py could
#: not parse (it drops that connection; the next call gets a new one).
_CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    InvalidResponse,
    OSError,
)

#: Options of a redis-py command whose reply is read as bytes, for records that
#: may hold anything (``fleet.core.stored`` decodes them, so a value that is not
#: UTF-8 fails only its own record, not the whole reply).
RAW: dict[str, Any] = {NEVER_DECODE: True}

#: Codes of error replies that mean "not now": the same call may succeed later.
#: LOADING: the server is loading its data set after a start. BUSY: a script
#: runs past ``busy-reply-threshold`` (until it ends or SCRIPT KILL). READONLY:
#: a replica, typically the old primary after a failover. MASTERDOWN: a replica
#: that lost its primary (``replica-serve-stale-data no``). NOREPLICAS: fewer
#: replicas than ``min-replicas-to-write``. TRYAGAIN, CLUSTERDOWN: a cluster
#: resharding or down (no Cluster support yet, but the meaning is the same).
NOT_NOW_CODES = frozenset(
    {"LOADING", "BUSY", "READONLY", "MASTERDOWN", "NOREPLICAS", "TRYAGAIN", "CLUSTERDOWN"}
)

#: redis-py's classes for some of those replies: it cuts the code off their
#: message, so the class is what tells them (MasterDownError, a ClusterDownError,
#: first; LOADING is BusyLoadingError, a ConnectionError, above).
_NOT_NOW_CLASSES: tuple[tuple[type[ResponseError], str], ...] = (
    (ReadOnlyError, "READONLY"),
    (MasterDownError, "MASTERDOWN"),
    (ClusterDownError, "CLUSTERDOWN"),
    (TryAgainError, "TRYAGAIN"),
)


def unavailable(safe_url: str, exc: BaseException) -> BackendUnavailable:
    """The error callers see when the server cannot be used."""
    return BackendUnavailable(f"redis at {safe_url} is unavailable: {exc}")


def _not_now(exc: ResponseError) -> str | None:
    """The code of an error reply that means "not now", else None."""
    if isinstance(exc, ReplyError):  # the script lane's: code kept
        code = exc.code
    else:
        for cls, known in _NOT_NOW_CLASSES:
            if isinstance(exc, cls):
                return known
        code = str(exc).split(" ", 1)[0]  # redis-py has no class for BUSY, NOREPLICAS
    return code if code in NOT_NOW_CODES else None


def translate(safe_url: str, exc: BaseException) -> BackendError | None:
    """The Fleet error for an exception of either client (the script lane or
    redis-py), or None if ``exc`` is none of theirs (a Fleet error already, a
    cancellation, a programming error such as a TypeError for a bad argument).

    The one place where driver errors become Fleet's: ``BackendUnavailable``
    for a connection that failed and for the error replies of
    :data:`NOT_NOW_CODES`, ``BackendError`` for every other error reply and
    driver error. NOSCRIPT never gets here: :mod:`~fleet.backends.redis.scripts`
    reloads the script and retries first.
    """
    if isinstance(exc, BackendError):
        return None
    if isinstance(exc, ResponseError):  # an error reply, from either client
        code = _not_now(exc)
        if code is not None:
            text = str(exc)
            shown = text if text.startswith(code) else f"{code} {text}"
            return BackendUnavailable(f"redis at {safe_url} cannot serve this now: {shown}")
        return BackendError(f"redis at {safe_url} refused the call: {exc}")
    if isinstance(exc, _CONNECTION_ERRORS):
        return unavailable(safe_url, exc)
    if isinstance(exc, UnicodeDecodeError):
        # a reply holding bytes that are not UTF-8 (not written by Fleet): only that
        # call fails, and a retry would fail the same way
        return BackendError(f"redis at {safe_url} sent a reply that is not UTF-8: {exc}")
    if isinstance(exc, RedisError):  # redis-py's DataError, PubSubError...
        return BackendError(f"redis at {safe_url}: {type(exc).__name__}: {exc}")
    return None


class _Guard:
    """``with`` block translating driver errors into Fleet's (:func:`translate`).
    A plain class rather than ``@contextmanager``: it wraps every call, and a
    generator-based one costs several µs each time; a call that succeeds costs
    one ``is None`` test."""

    __slots__ = ("_safe_url",)

    def __init__(self, safe_url: str) -> None:
        self._safe_url = safe_url

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is None:
            return
        translated = translate(self._safe_url, exc)
        if translated is not None:
            raise translated from exc


def make_client(url: str, *, blocking: bool) -> Redis:
    """A redis.asyncio client for ``url`` (redis://, rediss://, unix://, or the
    primary of a redis+sentinel:// URL).

    Timeouts given in the URL's query string (``socket_timeout=...``) win over
    the defaults. A failed connection is retried once at once (a pooled
    connection may predate a server restart); timeouts are not retried so a
    script never runs twice because it was slow. Calls past the pool's
    connections wait for one (:class:`~fleet.backends.redis.queued.QueuedPool`).
    """
    options: dict[str, Any] = {
        "decode_responses": True,
        "socket_connect_timeout": CONNECT_TIMEOUT,
        "socket_timeout": None if blocking else COMMAND_TIMEOUT,
        "retry": Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
        "client_name": "fleet-blocking" if blocking else "fleet",
    }
    where = redact_url(url)
    if is_sentinel_url(url):
        return sentinel_client(  # type: ignore[no-any-return]
            parse_sentinel_url(url),
            connect_timeout=CONNECT_TIMEOUT,
            command_timeout=None if blocking else COMMAND_TIMEOUT,
            client_name=options["client_name"],
            retry=options["retry"],
            where=where,
        )
    # A call past the pool's connections waits for one (fleet/backends/redis/queued.py).
    return Redis.from_pool(QueuedPool.from_url(url, queue_where=where, **options))


class RedisCore:
    """State every part of the Redis backend shares.

    Args:
        url: ``redis://[user:password@]host:port/db``, ``rediss://...`` (TLS),
            ``unix:///path/to/redis.sock?db=0`` or
            ``redis+sentinel://[user:password@]host:port[,host:port...]/service[/db]``.
            The password is never printed.

    Raises:
        UnsupportedBackend: The URL asks for Redis Cluster.
        ConfigError: The URL cannot be read (not a redis URL, a bad option or
            TLS file).
    """

    def __init__(self, url: str) -> None:
        self.url = url
        url, namespace = namespace_of(url)
        self._conn_url = url
        self._safe_url = redact_url(self.url)
        self._guard_cm = _Guard(self._safe_url)
        #: ``redis+cluster://``: the nodes to start from (None: one server).
        self._cluster: ClusterTarget | None = None
        # Read the URL now, so a URL the backend cannot serve fails here rather
        # than at the first call.
        try:
            if is_cluster_url(url):
                self._cluster = parse_cluster_url(url)
                self._endpoint = Endpoint()  # a cluster has one database: 0
            else:
                read = sentinel_endpoint if is_sentinel_url(url) else endpoint_from_url
                self._endpoint = read(
                    url,
                    connect_timeout=CONNECT_TIMEOUT,
                    command_timeout=COMMAND_TIMEOUT,
                    client_name="fleet-scripts",
                )
        except BackendError:
            raise
        except (ValueError, OSError) as exc:  # OSError: a TLS file cannot be read
            raise ConfigError(f"redis URL {self._safe_url}: {exc}") from exc
        #: Every key and channel name of this fleet (its namespace's prefix, and on a
        #: cluster its hash tags).
        self._keys = KeySpace(namespace, cluster=self._cluster is not None)
        self._scripts: Scripts = scripts()
        self._cmd: Redis | None = None
        self._blk: Redis | None = None
        self._fast: Lane | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._closed = False
        #: BLPOP calls in flight, cancelled by close().
        self._blocked: set[asyncio.Future[Any]] = set()
        #: Live subscriptions, closed with the backend.
        self._subs: weakref.WeakSet[Any] = weakref.WeakSet()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._safe_url!r})"

    # The clients are typed Any: redis-py types every reply as bytes | str, while
    # these clients decode replies (decode_responses=True), so every reply is str.
    @property
    def _r(self) -> Any:
        """The command client (connecting lazily if ``connect`` was not called)."""
        if self._cmd is None:
            self._cmd = self._client(blocking=False)
        return self._cmd

    @property
    def _lane(self) -> Lane:
        """The script lane (connecting lazily on its first call); on a cluster, the
        cluster client behind the lane's interface."""
        if self._fast is None:
            self._fast = (
                RespClient(self._endpoint) if self._cluster is None else ClusterLane(self._r)
            )
        return self._fast

    @property
    def _b(self) -> Any:
        """The client used only for blocking commands."""
        if self._blk is None:
            self._blk = self._client(blocking=True)
        return self._blk

    def _client(self, *, blocking: bool) -> Any:
        if self._cluster is None:
            return make_client(self._conn_url, blocking=blocking)
        return cluster_client(
            self._cluster,
            connect_timeout=CONNECT_TIMEOUT,
            command_timeout=None if blocking else COMMAND_TIMEOUT,
            name="fleet-blocking" if blocking else "fleet",
            where=self._safe_url,
        )

    def _unavailable(self, exc: BaseException) -> BackendUnavailable:
        return unavailable(self._safe_url, exc)

    def _pipeline(self, *, transaction: bool) -> Any:
        """A pipeline of the command client; on a cluster never a transaction (its
        commands may go to several nodes): each command still runs atomically."""
        return self._r.pipeline(transaction=transaction and self._cluster is None)

    def _guard(self) -> _Guard:
        """Translate driver errors into Fleet's (see :func:`translate`)."""
        return self._guard_cm

    def _spawn(self, coro: Any) -> None:
        """Run a cleanup coroutine in the background, kept alive until done; its
        failure is logged, never raised (there is nobody to raise it to)."""

        async def quietly() -> None:
            try:
                await coro
            except Exception as exc:
                log.warning("redis backend %s: background cleanup failed: %s", self._safe_url, exc)

        task = asyncio.ensure_future(quietly())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _close_clients(self) -> None:
        self._closed = True
        for blocked in list(self._blocked):
            blocked.cancel()
        for sub in list(self._subs):
            await sub.aclose()
        if self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
        for client in (self._cmd, self._blk):
            if client is not None:
                try:
                    await client.aclose()
                    await close_sentinels(client)
                except Exception:
                    pass
        if self._fast is not None:
            await self._fast.close()
        self._cmd = None
        self._blk = None
        self._fast = None


class RedisPart:
    """A capability of the Redis backend as an object of its own (``backend.queues``,
    ``backend.limits``, ...), over the connections and scripts of the backend's core."""

    def __init__(self, core: RedisCore) -> None:
        self._core = core
        self._scripts = core._scripts

    @property
    def _lane(self) -> Lane:
        return self._core._lane

    @property
    def _r(self) -> Any:
        return self._core._r

    @property
    def _b(self) -> Any:
        return self._core._b

    @property
    def _closed(self) -> bool:
        return self._core._closed

    @property
    def _keys(self) -> KeySpace:
        return self._core._keys

    @property
    def _blocked(self) -> set[asyncio.Future[Any]]:
        return self._core._blocked

    @property
    def _endpoint(self) -> Any:
        return self._core._endpoint

    def _guard(self) -> _Guard:
        return self._core._guard()

    async def _live_records(self, tasks_key: str, task_ids: Sequence[str]) -> list[str | None]:
        """The state records of live tasks, ``None`` where an id has none: from
        their buckets, else (a long record) from ``tasks_key`` itself (see
        ``keys.record_key``). The reads go out together, one round trip each way."""
        found = await asyncio.gather(
            *(self._lane.execute("HGET", keys.record_key(tasks_key, t), t) for t in task_ids)
        )
        missing = [i for i, raw in enumerate(found) if raw is None]
        if missing:
            rest = await self._lane.execute("HMGET", tasks_key, *[task_ids[i] for i in missing])
            for i, raw in zip(missing, rest, strict=True):
                found[i] = raw
        return [None if raw is None else str(raw) for raw in found]

    def _unavailable(self, exc: BaseException) -> BackendUnavailable:
        return self._core._unavailable(exc)

    def _pipeline(self, *, transaction: bool) -> Any:
        return self._core._pipeline(transaction=transaction)

    def _channel(self, topic: str) -> str:
        """The pub/sub channel of ``topic`` in this fleet (its namespace, its database)."""
        return self._keys.event_channel(topic, self._endpoint.db)

    def _not_on_cluster(self, what: str) -> None:
        """Refuse a capability whose scripts span several hash slots on a cluster."""
        if self._core._cluster is not None:
            raise UnsupportedBackend(
                f"{what} is not supported on Redis Cluster yet (its atomic steps span the "
                "keys of several automation types); use one Redis server (redis://) or "
                "Sentinel (redis+sentinel://) for a fleet that needs it"
            )

    def _spawn(self, coro: Any) -> None:
        self._core._spawn(coro)
