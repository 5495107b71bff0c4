"""Where a Redis backend connects: the URL read into an :class:`Endpoint` (host or
socket, database, credentials, TLS, timeouts), and the URLs this client refuses.

The grammar is redis-py's (:func:`redis.connection.parse_url`), so both clients of a
backend read one URL the same way.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from redis.connection import parse_url

from fleet.core.errors import UnsupportedBackend

#: Options of a redis URL this client understands; any other ``ssl_*`` option
#: is refused, so a TLS setting is never silently dropped.
_SSL_OPTIONS = (
    "ssl_cert_reqs",
    "ssl_ca_certs",
    "ssl_ca_path",
    "ssl_ca_data",
    "ssl_certfile",
    "ssl_keyfile",
    "ssl_password",
    "ssl_check_hostname",
)
_CERT_REQS = {
    "none": ssl.CERT_NONE,
    "optional": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


#: Words of a URL scheme (split at ``+`` and ``-``: ``redis+sentinel``,
#: ``rediss-cluster``...) and query options that ask for a deployment this
#: client cannot talk to. redis-py's own grammar has no such scheme and passes
#: unknown query options on to its connections, which refuse them only at the
#: first call; these are refused when the URL is read.
_SENTINEL_WORDS = frozenset({"sentinel", "sentinels"})
_CLUSTER_WORDS = frozenset({"cluster"})
_SENTINEL_OPTIONS = ("sentinel", "sentinels", "service_name", "master_name", "sentinel_master")
_CLUSTER_OPTIONS = ("cluster", "cluster_mode", "read_from_replicas", "require_full_coverage")


@dataclass(frozen=True)
class Endpoint:
    """Where and how to connect, read from a redis URL."""

    host: str = "localhost"
    port: int = 6379
    path: str | None = None
    username: str | None = None
    password: str | None = None
    db: int = 0
    tls: ssl.SSLContext | None = None
    server_hostname: str | None = None
    connect_timeout: float = 3.0
    command_timeout: float | None = 10.0
    client_name: str | None = None
    #: ``redis+sentinel://``: asked for the primary's address at each connect (host
    #: and port above are then unused), whose ``ROLE`` is then checked.
    locate: Callable[[], Awaitable[tuple[str, int]]] | None = None


def _tls_context(options: dict[str, Any]) -> ssl.SSLContext:
    unknown = [k for k in options if k.startswith("ssl_") and k not in _SSL_OPTIONS]
    if unknown:
        raise ValueError(f"unsupported TLS option(s) in the redis URL: {', '.join(unknown)}")
    reqs_raw = options.get("ssl_cert_reqs", "required")
    if isinstance(reqs_raw, str):
        if reqs_raw.lower() not in _CERT_REQS:
            raise ValueError(f"ssl_cert_reqs must be one of {sorted(_CERT_REQS)}, not {reqs_raw!r}")
        reqs = _CERT_REQS[reqs_raw.lower()]
    else:
        reqs = ssl.VerifyMode(reqs_raw)
    ctx = ssl.create_default_context(
        cafile=options.get("ssl_ca_certs"),
        capath=options.get("ssl_ca_path"),
        cadata=options.get("ssl_ca_data"),
    )
    if options.get("ssl_certfile"):
        ctx.load_cert_chain(
            options["ssl_certfile"], options.get("ssl_keyfile"), options.get("ssl_password")
        )
    check = options.get("ssl_check_hostname", True)
    if isinstance(check, str):
        check = check.lower() in ("1", "true", "yes", "y")
    # hostname checks need a verified certificate; turn them off first
    ctx.check_hostname = bool(check) and reqs != ssl.CERT_NONE
    ctx.verify_mode = reqs
    return ctx


def refuse_unservable(url: str) -> None:
    """Refuse a URL that asks for Redis Sentinel or Redis Cluster.

    Raises:
        UnsupportedBackend: The scheme (``redis+sentinel://``, ``sentinel://``,
            ``redis+cluster://``...) or a query option (``?cluster=true``,
            ``?service_name=...``) names Sentinel or Cluster.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    words = set(re.split(r"[+-]", scheme))
    options = parse_qs(parts.query, keep_blank_values=True)
    sentinel = next((f"option {o!r}" for o in _SENTINEL_OPTIONS if o in options), None)
    cluster = next((f"option {o!r}" for o in _CLUSTER_OPTIONS if o in options), None)
    if words & _SENTINEL_WORDS:
        sentinel = f"scheme {scheme}://"
    elif words & _CLUSTER_WORDS:
        cluster = f"scheme {scheme}://"
    if sentinel is not None:
        raise UnsupportedBackend(
            f"the redis URL's {sentinel} asks for Redis Sentinel in a form the Redis "
            "backend does not read: write redis+sentinel://[user:pass@]host:port"
            "[,host:port...]/service[/db] (the script lane and redis-py's clients then ask "
            "those sentinels for the primary; TLS through Sentinel is not supported)"
        )
    if cluster is not None:
        raise UnsupportedBackend(
            f"the redis URL's {cluster} asks for Redis Cluster in a form the Redis backend "
            "does not read: write redis+cluster://[user:pass@]host:port[,host:port...] "
            "(redis-py's cluster client then follows the cluster's redirections)"
        )


def endpoint_from_url(
    url: str,
    *,
    connect_timeout: float,
    command_timeout: float | None,
    client_name: str | None = None,
) -> Endpoint:
    """Read ``redis://``, ``rediss://`` or ``unix://`` URL into an :class:`Endpoint`.

    Timeouts in the query string (``socket_connect_timeout``, ``socket_timeout``)
    win over the arguments.

    Raises:
        UnsupportedBackend: The URL asks for Sentinel or Cluster
            (:func:`refuse_unservable`; a ``ValueError`` too).
        ValueError: The URL is not a redis URL, or names a TLS option this
            client does not support.
    """
    refuse_unservable(url)
    options = parse_url(url)  # type: ignore[no-untyped-call]
    conn_class = options.pop("connection_class", None)
    tls = None
    if conn_class is not None and "SSL" in conn_class.__name__:
        tls = _tls_context(options)
    return Endpoint(
        host=options.get("host") or "localhost",
        port=int(options.get("port") or 6379),
        path=options.get("path"),
        username=options.get("username"),
        password=options.get("password"),
        db=int(options.get("db") or 0),
        tls=tls,
        server_hostname=options.get("host") if tls is not None else None,
        connect_timeout=float(options.get("socket_connect_timeout") or connect_timeout),
        command_timeout=options.get("socket_timeout", command_timeout),
        client_name=client_name,
    )
