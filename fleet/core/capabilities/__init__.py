"""The backend's capabilities, one small interface each.

Handles, the worker and the master type against the narrow interface they use;
``fleet.backends.base.Backend`` is their union, implemented by every backend
(memory, SQLite, Redis) and checked by one conformance module per capability.
A new capability is one new interface here, implemented three times, tested once.
"""

import abc

from fleet.core.capabilities.browse import Browse
from fleet.core.capabilities.configs import Configs
from fleet.core.capabilities.domains import Domains
from fleet.core.capabilities.errors import ErrorGroups
from fleet.core.capabilities.events import Events, Subscription
from fleet.core.capabilities.groups import TaskGroups
from fleet.core.capabilities.history import History
from fleet.core.capabilities.identities import Identities
from fleet.core.capabilities.limits import Limiters
from fleet.core.capabilities.meters import Meters
from fleet.core.capabilities.pools import Pools
from fleet.core.capabilities.primitives import KV, Counters, Locks
from fleet.core.capabilities.proxies import ProxyHealth
from fleet.core.capabilities.queues import TaskQueues
from fleet.core.capabilities.runs import Runs
from fleet.core.capabilities.schedules import ScheduleStore
from fleet.core.capabilities.state import Catalog, Workers
from fleet.core.capabilities.streams import Streams
from fleet.core.capabilities.webhooks import Webhooks


class TaskCapabilities(abc.ABC):
    """What a running task's ``ctx`` reaches, one capability object each: submit,
    emit, pools, streams, kv, locks, counters, limiters and events
    (``fleet.backends.base.Backend`` is one)."""

    #: Task queues (``ctx.submit``).
    queues: TaskQueues
    #: Output streams (``ctx.emit``, ``ctx.stream``, progress reports).
    streams: Streams
    #: ``ctx.pool``.
    pools: Pools
    #: ``ctx.kv``.
    kv: KV
    #: ``ctx.lock``.
    locks: Locks
    #: ``ctx.counter``.
    counters: Counters
    #: ``ctx.events``.
    events: Events
    #: The fleet-wide limiters of ``ctx.limit``.
    limits: Limiters
    #: Identity pools (``ctx.identity``).
    identities: Identities
    #: Proxy health (a tier's exits that are cooling are passed over).
    proxies: ProxyHealth
    #: The proxy tier of each domain, learned fleet-wide from the verdicts tasks meet.
    domains: Domains
    #: Sums of what the fleet spent, per run, type, domain, pool and hour (``ctx.meter``).
    meters: Meters
    #: Runs (a run's budget: the meters of its tasks are sent as each ends).
    runs: Runs
    #: Flow-control groups (a crawl tightens a host's rate to its ``Crawl-delay``).
    groups: TaskGroups
    #: Webhook subscriptions and delivery logs (the built-in ``fleet-webhooks`` type).
    webhooks: Webhooks
    #: Failures grouped by kind, with snapshots (a failed attempt lands in its group).
    errors: ErrorGroups


__all__ = [
    "KV",
    "Browse",
    "Catalog",
    "Configs",
    "Counters",
    "Domains",
    "ErrorGroups",
    "Events",
    "History",
    "Identities",
    "Limiters",
    "Locks",
    "Meters",
    "Pools",
    "ProxyHealth",
    "Runs",
    "ScheduleStore",
    "Streams",
    "Subscription",
    "TaskCapabilities",
    "TaskGroups",
    "TaskQueues",
    "Webhooks",
    "Workers",
]
