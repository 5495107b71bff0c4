"""The Backend: the only code that touches storage, the union of the capability
interfaces of :mod:`fleet.core.capabilities` (task queues, streams, pools, primitives,
limiters, proxy health, events, fleet state) plus its lifecycle.

Every abstract method is a contract; its docstring is the specification that the
conformance suite (``tests/conformance``, one module per capability) checks against
every implementation.
Implementations: ``memory://`` (one process), ``sqlite:///path`` (one host),
``redis://``/``rediss://`` (a fleet). Others register under the entry-point group
``fleet.backends``.

Conventions shared by every method:

* Time is Unix seconds (float) from :func:`fleet.core.records.now`.
* Every write is atomic: a crash at any point leaves either the state before or
  the state after the call, never a half-written task.
* "Type" means automation type; queue, stream and worker keys are per type.
* JSON values are ``dict``/``list``/``str``/numbers/bools/None; backends encode
  them with :func:`fleet.core.records.dumps`.
* A backend that cannot be reached raises :class:`fleet.core.errors.BackendUnavailable`
  (never hangs forever, never leaks a driver exception).
"""

from __future__ import annotations

import abc
import os
import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from fleet.core.capabilities import (
    KV,
    Browse,
    Catalog,
    Configs,
    Counters,
    Domains,
    ErrorGroups,
    Events,
    History,
    Limiters,
    Locks,
    Meters,
    Pools,
    ProxyHealth,
    Runs,
    ScheduleStore,
    Streams,
    Subscription,
    TaskCapabilities,
    TaskGroups,
    TaskQueues,
    Webhooks,
    Workers,
)
from fleet.core.capabilities.queues import log_expired
from fleet.core.capabilities.streams import STREAM_MAX_AGE, STREAM_MAX_LEN
from fleet.core.errors import ConfigError

__all__ = [
    "NAMESPACE",
    "STREAM_MAX_AGE",
    "STREAM_MAX_LEN",
    "Backend",
    "Subscription",
    "check_namespace",
    "log_expired",
    "namespace_of",
    "with_env_namespace",
]

#: What a namespace may be: 1-64 letters, digits, ``_``, ``.`` or ``-``.
NAMESPACE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def namespace_of(url: str) -> tuple[str, str]:
    """Split the ``namespace`` query option off a backend URL.

    Returns:
        The URL without it, and the namespace (``""``: none).

    Raises:
        ConfigError: The namespace is not 1-64 letters, digits, ``_``, ``.`` or ``-``.
    """
    parts = urlsplit(url)
    if "namespace=" not in parts.query:
        return url, ""
    query = parse_qsl(parts.query, keep_blank_values=True)
    found = [v for k, v in query if k == "namespace"]
    rest = urlencode([(k, v) for k, v in query if k != "namespace"])
    return urlunsplit(parts._replace(query=rest)), check_namespace(found[-1])


def check_namespace(namespace: str) -> str:
    """``namespace`` if it is one (``""``: none).

    Raises:
        ConfigError: It is not 1-64 letters, digits, ``_``, ``.`` or ``-``.
    """
    if namespace and not NAMESPACE.fullmatch(namespace):
        raise ConfigError(f"namespace {namespace!r}: use 1-64 letters, digits, '_', '.' or '-'")
    return namespace


def with_env_namespace(url: str) -> str:
    """``url`` with ``FLEET_NAMESPACE`` added as its ``namespace`` option, unless it
    names one itself (the URL wins) or the variable is unset or empty."""
    namespace = os.environ.get("FLEET_NAMESPACE", "")
    if not namespace or "namespace=" in urlsplit(url).query:
        return url
    return url + ("&" if urlsplit(url).query else "?") + urlencode({"namespace": namespace})


class Backend(TaskCapabilities, abc.ABC):
    """Storage for queues, streams, pools, primitives, limiters, events and fleet state.

    Create one with :func:`fleet.backends.open_backend`; call :meth:`connect`
    before use (``open_backend`` does) and :meth:`close` when done. One instance
    is safe to share between all asyncio tasks of one event loop.

    Each capability is an object of its own (``backend.queues.reserve(...)``,
    ``backend.limits.acquire(...)``); each backend package builds them in its
    ``backend.py`` from the module of the same name. Code that needs one
    capability receives that object, not the backend.
    """

    url: str
    #: Task queues (:class:`~fleet.core.capabilities.TaskQueues`).
    queues: TaskQueues
    #: Task groups, fair and limited fleet-wide (:class:`~fleet.core.capabilities.TaskGroups`).
    groups: TaskGroups
    #: Output streams (:class:`~fleet.core.capabilities.Streams`).
    streams: Streams
    #: Pools (:class:`~fleet.core.capabilities.Pools`).
    pools: Pools
    #: Key/value (:class:`~fleet.core.capabilities.KV`).
    kv: KV
    #: Locks (:class:`~fleet.core.capabilities.Locks`).
    locks: Locks
    #: Counters (:class:`~fleet.core.capabilities.Counters`).
    counters: Counters
    #: Pub/sub events (:class:`~fleet.core.capabilities.Events`).
    events: Events
    #: The catalog (:class:`~fleet.core.capabilities.Catalog`).
    catalog: Catalog
    #: Worker records (:class:`~fleet.core.capabilities.Workers`).
    workers: Workers
    #: Configs and their generations (:class:`~fleet.core.capabilities.Configs`).
    configs: Configs
    #: Runs: the tasks of one job, counted, ended once (:class:`~fleet.core.capabilities.Runs`).
    runs: Runs
    #: Schedules (:class:`~fleet.core.capabilities.ScheduleStore`).
    schedules: ScheduleStore
    #: The limiters of ``ctx.limit`` (:class:`~fleet.core.capabilities.Limiters`).
    limits: Limiters
    #: Proxy health (:class:`~fleet.core.capabilities.ProxyHealth`).
    proxies: ProxyHealth
    #: Pages of tasks by state and DLQ selections (:class:`~fleet.core.capabilities.Browse`).
    browse: Browse
    #: Per-type history by minute and hour (:class:`~fleet.core.capabilities.History`).
    history: History
    #: Proxy tiers per domain, learned fleet-wide (:class:`~fleet.core.capabilities.Domains`).
    domains: Domains
    #: Sums of what the fleet spent, by scope (:class:`~fleet.core.capabilities.Meters`).
    meters: Meters
    #: Failure groups and snapshots (:class:`~fleet.core.capabilities.ErrorGroups`).
    errors: ErrorGroups
    #: Webhook subscriptions and their delivery logs (:class:`~fleet.core.capabilities.Webhooks`).
    webhooks: Webhooks

    async def connect(self) -> None:
        """Open connections / files and create schema. Idempotent."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release every connection, file and waiter. Idempotent."""

    @abc.abstractmethod
    async def ping(self) -> bool:
        """True if the storage answers now; False (never raises) otherwise."""

    @abc.abstractmethod
    async def purge_type(self, automation_type: str) -> None:
        """Delete every piece of state of a type: queue (all tiers and states),
        task states, idempotency keys, counters, stream, catalog entry, config
        and worker records (``wkr:<type>:*``, ``wkrs:<type>`` and its
        ``wkrs:all`` members)."""

    async def __aenter__(self) -> Backend:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
