"""The backend's capabilities, one small interface each.

Handles, the worker and the master type against the narrow interface they use;
``fleet.backends.base.Backend`` is their union, implemented by every backend
(memory, SQLite, Redis) and checked by one conformance module per capability.
A new capability is one new interface here, implemented three times, tested once.
"""

from fleet.core.capabilities.events import Events, Subscription
from fleet.core.capabilities.groups import TaskGroups
from fleet.core.capabilities.limits import Limiters
from fleet.core.capabilities.pools import Pools
from fleet.core.capabilities.primitives import Primitives
from fleet.core.capabilities.proxies import ProxyHealth
from fleet.core.capabilities.queues import TaskQueues
from fleet.core.capabilities.schedules import ScheduleStore
from fleet.core.capabilities.state import FleetState
from fleet.core.capabilities.streams import Streams

__all__ = [
    "Events",
    "FleetState",
    "Limiters",
    "Pools",
    "Primitives",
    "ProxyHealth",
    "ScheduleStore",
    "Streams",
    "Subscription",
    "TaskGroups",
    "TaskQueues",
]
