"""Redis Cluster: ``redis+cluster://[user:pass@]host:port[,host:port...][?options]``.

The backend's commands and scripts go through redis-py's cluster client, which finds
the node of each key's hash slot and follows ``MOVED``/``ASK`` redirections; the
single-node script lane (:mod:`fleet.backends.redis.resp`) stays for plain Redis.
Every key of one automation type carries the hash tag ``{<type>}``
(:class:`~fleet.backends.redis.keys.KeySpace` with ``cluster=True``), so one type's
scripts touch one slot; pools share the tag ``{pools}``; fleet-wide keys (the catalog,
``wkrs:all``) are written by commands of their own, never inside a per-type script.
Pub/sub is the cluster's: a message published on any node reaches subscribers on every
node.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

from redis.exceptions import NoScriptError, ResponseError

from fleet.backends.redis.queued import (
    POOL_CONNECTIONS,
    POOL_WAIT_SECONDS,
    ConnectionQueue,
    queued_call,
)
from fleet.backends.redis.resp import ReplyError

if TYPE_CHECKING:
    # imported when a cluster URL is opened: the cluster client costs a one-server
    # worker's start ~0.1 s of imports for nothing
    from redis.asyncio.cluster import RedisCluster

SCHEMES = frozenset({"redis+cluster", "rediss+cluster"})


def is_cluster_url(url: str) -> bool:
    """``redis+cluster://`` or ``rediss+cluster://`` (TLS)."""
    return urlsplit(url).scheme.lower() in SCHEMES


@dataclass(frozen=True)
class ClusterTarget:
    """What a ``redis+cluster://`` URL names."""

    nodes: tuple[tuple[str, int], ...]
    username: str | None = None
    password: str | None = None
    tls: bool = False


def parse_cluster_url(url: str) -> ClusterTarget:
    """Read a ``redis+cluster://`` URL.

    Raises:
        ValueError: No node, a bad port, a database other than 0 (a cluster has one),
            or an option this backend does not read.
    """
    parts = urlsplit(url)
    netloc = parts.netloc
    username = password = None
    if "@" in netloc:
        auth, netloc = netloc.rsplit("@", 1)
        user, _, secret = auth.partition(":")
        username, password = unquote(user) or None, unquote(secret) or None
    nodes: list[tuple[str, int]] = []
    for item in filter(None, netloc.split(",")):
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"cluster node {item!r} is not host:port")
        nodes.append((host.strip("[]"), int(port)))
    if not nodes:
        raise ValueError("a redis+cluster:// URL names at least one node: host:port[,host:port]")
    if parts.path.strip("/") not in ("", "0"):
        raise ValueError("a Redis Cluster has one database (0): drop the /<db> of the URL")
    unknown = sorted(set(parse_qs(parts.query)))
    if unknown:
        raise ValueError(f"unknown redis+cluster URL option(s) {unknown}")
    return ClusterTarget(tuple(nodes), username, password, parts.scheme.lower() == "rediss+cluster")


def cluster_client(
    target: ClusterTarget,
    *,
    connect_timeout: float,
    command_timeout: float | None,
    name: str,
    where: str = "",
) -> RedisCluster:
    """redis-py's cluster client for ``target`` (replies decoded), its calls past
    ``POOL_CONNECTIONS`` queued (see :func:`queued_cluster`)."""
    from redis.asyncio.cluster import ClusterNode

    client: RedisCluster = queued_cluster()(
        startup_nodes=[ClusterNode(host, port) for host, port in target.nodes],
        username=target.username,
        password=target.password,
        ssl=target.tls,
        decode_responses=True,
        socket_connect_timeout=connect_timeout,
        socket_timeout=command_timeout,
        client_name=name,
        max_connections=POOL_CONNECTIONS,
    )
    client._fleet_queue = ConnectionQueue(POOL_CONNECTIONS, POOL_WAIT_SECONDS, where)  # type: ignore[attr-defined]
    return client


@functools.cache
def queued_cluster() -> type[RedisCluster]:
    """redis-py's cluster client with a :class:`ConnectionQueue` in front.

    Its nodes' pools refuse a connection past ``max_connections`` at once and cannot
    wait (they hand connections out synchronously), so the client itself queues:
    every command and every pipeline holds one place while it runs, and one call
    holds at most one connection per node, so no node's pool is ever full.
    """
    from redis.asyncio.cluster import ClusterPipeline, RedisCluster

    class QueuedClusterPipeline(ClusterPipeline):
        async def execute(self, *args: Any, **kwargs: Any) -> Any:
            queue = self.cluster_client._fleet_queue  # type: ignore[attr-defined]
            return await queued_call(queue, super().execute, *args, **kwargs)

    class QueuedCluster(RedisCluster):
        _fleet_queue: ConnectionQueue

        async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
            return await queued_call(self._fleet_queue, super().execute_command, *args, **kwargs)

        def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> Any:
            if shard_hint:
                return super().pipeline(transaction, shard_hint)  # redis-py's refusal
            return QueuedClusterPipeline(self, transaction)  # type: ignore[abstract]

    return QueuedCluster


class ClusterLane:
    """The script lane's interface (``execute``, ``evalsha``, ``close``) over the
    cluster client: a script goes to the node of its keys' slot."""

    #: Scripts run by EVALSHA: redis-py routes EVALSHA by its keys itself, but
    #: would ask a node (COMMAND GETKEYS) for the keys of every FCALL.
    functions = False

    def __init__(self, client: RedisCluster) -> None:
        self._client = client

    async def execute(self, *args: Any) -> Any:
        """One command, routed by its keys (``SCRIPT LOAD``: to every primary)."""
        try:
            if str(args[0]).upper() == "SCRIPT":
                out = await self._client.execute_command(*args, target_nodes=self._client.PRIMARIES)
                # One answer per primary (the same SHA): the first stands for all.
                return next(iter(out.values())) if isinstance(out, dict) else out
            return await self._client.execute_command(*args)
        except ResponseError as exc:
            raise _reply(exc) from exc

    async def evalsha(self, sha: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """``EVALSHA`` on the node of ``keys`` (which share one slot)."""
        try:
            return await self._client.execute_command("EVALSHA", sha, len(keys), *keys, *args)
        except ResponseError as exc:
            raise _reply(exc) from exc

    async def fcall(self, function: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """``FCALL`` on the node of ``keys`` (not used by the scripts, see ``functions``)."""
        try:
            return await self._client.execute_command("FCALL", function, len(keys), *keys, *args)
        except ResponseError as exc:
            raise _reply(exc) from exc

    async def close(self) -> None:
        """Nothing of its own: the cluster client is closed by the backend."""


def _reply(exc: ResponseError) -> ReplyError:
    # redis-py cuts the code off some replies (NOSCRIPT): put it back, so the
    # scripts' reload and the guard's translation see what the lane would give.
    if isinstance(exc, ReplyError):
        return exc
    if isinstance(exc, NoScriptError):
        return ReplyError(f"NOSCRIPT {exc}")
    return ReplyError(str(exc))
