"""Redis Sentinel: where the primary is, for both clients of the Redis backend.

URL: ``redis+sentinel://[user:password@]host:port[,host:port...]/service[/db]``,
with the query options of a redis URL (``socket_timeout=...``) and
``sentinel_password=...`` when the sentinels themselves ask for a password
(the user and password of the URL are the data servers').

* redis-py's clients (commands, blocking pops, pub/sub) are built by
  :class:`redis.asyncio.sentinel.Sentinel` ``.master_for(service)``: its pool asks
  the sentinels for the primary on every new connection and drops connections to a
  server that is no longer one.
* The script lane (:class:`~fleet.backends.redis.resp.RespClient`) asks the
  sentinels before each connection it opens (:func:`discover_primary`) and, once
  connected, checks with ``ROLE`` that the server is the primary: right after a
  failover a sentinel may still name the old one. A lane connection to a demoted
  server is retired on its first ``READONLY`` reply, and the next call asks again.

Nothing else changes: keys, scripts and channels are those of a plain Redis.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from redis.exceptions import ResponseError

from fleet.backends.redis.queued import POOL_CONNECTIONS, POOL_WAIT_SECONDS, QueuedPoolMixin
from fleet.backends.redis.resp import Endpoint, RespClient

#: URL schemes served through Sentinel.
SCHEMES = frozenset({"redis+sentinel"})


@dataclass(frozen=True)
class SentinelTarget:
    """What a ``redis+sentinel://`` URL names."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_password: str | None = None
    #: The remaining query options (timeouts), as redis-py reads them.
    options: dict[str, str] = field(default_factory=dict)


def is_sentinel_url(url: str) -> bool:
    return urlsplit(url).scheme.lower() in SCHEMES


def parse_sentinel_url(url: str) -> SentinelTarget:
    """Read a ``redis+sentinel://`` URL.

    Raises:
        ValueError: No sentinel address, a bad port, no service name, a db that is
            not a number, or a TLS option (TLS through Sentinel is not supported).
    """
    parts = urlsplit(url)
    if parts.scheme.lower() not in SCHEMES:
        raise ValueError(f"not a Sentinel URL (scheme {parts.scheme}://)")
    netloc = parts.netloc
    username = password = None
    if "@" in netloc:
        auth, netloc = netloc.rsplit("@", 1)
        user, _, pw = auth.partition(":")
        username = unquote(user) or None
        password = unquote(pw) if pw else None
    sentinels: list[tuple[str, int]] = []
    for item in netloc.split(","):
        host, _, port = item.strip().rpartition(":")
        if not host:
            host, port = item.strip(), "26379"
        if not host:
            raise ValueError("a Sentinel URL names at least one sentinel: host:port[,host:port]")
        try:
            sentinels.append((host.strip("[]"), int(port)))
        except ValueError:
            raise ValueError(f"sentinel {item!r}: the port is not a number") from None
    path = [p for p in parts.path.split("/") if p]
    if not path:
        raise ValueError(
            "a Sentinel URL names the service (the monitored primary): .../service[/db]"
        )
    if len(path) > 2:
        raise ValueError("a Sentinel URL's path is /service or /service/db")
    try:
        db = int(path[1]) if len(path) == 2 else 0
    except ValueError:
        raise ValueError(f"db {path[1]!r} is not a number") from None
    query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
    if any(k.startswith("ssl") for k in query):
        raise ValueError(
            "TLS through Sentinel is not supported: use redis+sentinel:// on a private network"
        )
    sentinel_password = query.pop("sentinel_password", None)
    return SentinelTarget(
        sentinels=tuple(sentinels),
        service=unquote(path[0]),
        db=db,
        username=username,
        password=password,
        sentinel_password=sentinel_password,
        options=query,
    )


def sentinel_endpoint(
    url: str, *, connect_timeout: float, command_timeout: float | None, client_name: str
) -> Endpoint:
    """The script lane's :class:`Endpoint` for a ``redis+sentinel://`` URL: it asks
    the sentinels for the primary at each connect.

    Raises:
        ValueError: See :func:`parse_sentinel_url`.
    """
    target = parse_sentinel_url(url)
    connect, command = _timeouts(target, connect_timeout, command_timeout)

    async def locate() -> tuple[str, int]:
        return await discover_primary(target, connect)

    return Endpoint(
        username=target.username,
        password=target.password,
        db=target.db,
        connect_timeout=connect,
        command_timeout=command,
        client_name=client_name,
        locate=locate,
    )


def _timeouts(
    target: SentinelTarget, connect: float, command: float | None
) -> tuple[float, float | None]:
    """The connect and command timeouts: the URL's options win over the defaults."""
    return (
        _float(target.options, "socket_connect_timeout", connect) or connect,
        _float(target.options, "socket_timeout", command),
    )


def _float(options: dict[str, str], name: str, default: float | None) -> float | None:
    raw = options.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None


def sentinel_client(
    target: SentinelTarget,
    *,
    connect_timeout: float,
    command_timeout: float | None,
    client_name: str,
    retry: Any,
    where: str = "",
) -> Any:
    """A redis.asyncio client of the primary ``target`` names (via ``master_for``),
    whose pool queues the calls past its connections, as a plain server's does
    (:mod:`fleet.backends.redis.queued`)."""
    from redis.asyncio.sentinel import Sentinel

    connect, timeout = _timeouts(target, connect_timeout, command_timeout)
    sentinel_kwargs: dict[str, Any] = {"socket_timeout": connect, "socket_connect_timeout": connect}
    if target.sentinel_password is not None:
        sentinel_kwargs["password"] = target.sentinel_password
    sentinel = Sentinel(  # type: ignore[no-untyped-call,unused-ignore]
        list(target.sentinels),
        sentinel_kwargs=sentinel_kwargs,
        socket_connect_timeout=connect,
        socket_timeout=timeout,
    )
    client = sentinel.master_for(
        target.service,
        db=target.db,
        username=target.username,
        password=target.password,
        decode_responses=True,
        client_name=client_name,
        retry=retry,
        connection_pool_class=queued_sentinel_pool(),
        queue_where=where,
    )
    # Closing the client closes its pool, not the Sentinel's own connections to
    # the sentinels: close_sentinels does, from here.
    client._fleet_sentinel = sentinel
    return client


@functools.cache
def queued_sentinel_pool() -> type[Any]:
    """redis-py's Sentinel pool with the queue of :mod:`~fleet.backends.redis.queued`
    in front (made on first use: the Sentinel module is imported only for a
    ``redis+sentinel://`` URL)."""
    from redis.asyncio.sentinel import SentinelConnectionPool

    class QueuedSentinelPool(QueuedPoolMixin, SentinelConnectionPool):
        def __init__(
            self,
            service_name: str,
            sentinel_manager: Any,
            *,
            queue_wait: float = POOL_WAIT_SECONDS,
            queue_where: str = "",
            **kwargs: Any,
        ) -> None:
            kwargs["max_connections"] = kwargs.get("max_connections") or POOL_CONNECTIONS
            super().__init__(service_name, sentinel_manager, **kwargs)  # type: ignore[no-untyped-call]
            self._fleet_init(queue_wait, queue_where)

    return QueuedSentinelPool


async def close_sentinels(client: Any) -> None:
    """Close the sentinel connections of a client :func:`sentinel_client` made."""
    sentinel = getattr(client, "_fleet_sentinel", None)
    if sentinel is not None:
        for s in sentinel.sentinels:
            await s.aclose()


async def discover_primary(target: SentinelTarget, timeout: float) -> tuple[str, int]:
    """The primary's address, from the first sentinel that knows it.

    Raises:
        ConnectionError: No sentinel answered with an address.
    """
    errors: list[str] = []
    for host, port in target.sentinels:
        client = RespClient(
            Endpoint(
                host=host,
                port=port,
                password=target.sentinel_password,
                connect_timeout=timeout,
                command_timeout=timeout,
            )
        )
        try:
            addr = await client.execute("SENTINEL", "get-master-addr-by-name", target.service)
        except (OSError, ResponseError) as exc:  # this one cannot tell: ask the next
            errors.append(f"{host}:{port}: {type(exc).__name__}: {exc}")
            continue
        finally:
            await client.close()
        if isinstance(addr, list) and len(addr) == 2:
            return str(addr[0]), int(addr[1])
        errors.append(f"{host}:{port}: does not monitor {target.service!r}")
    raise ConnectionError(
        f"no sentinel named the primary of {target.service!r}: " + "; ".join(errors)
    )


__all__ = [
    "SCHEMES",
    "SentinelTarget",
    "close_sentinels",
    "discover_primary",
    "is_sentinel_url",
    "parse_sentinel_url",
    "sentinel_client",
    "sentinel_endpoint",
]
