"""The command pool as a queue: a call past the pool's connections waits for one.

redis-py's pools refuse a call at once when every connection is in use
(``MaxConnectionsError``, a ``ConnectionError``), which read like an outage: a master
serving more simultaneous requests than the pool holds answered 503 to the rest.
Here every way a Redis backend takes a command connection (the plain pool, the
Sentinel pool, the cluster client) first takes a place in a :class:`ConnectionQueue`
of as many places as the pool has connections: callers past them wait, first come
first served, at most ``wait_seconds``; a caller still waiting then gets
``BackendBusy`` (a 503 with ``Retry-After``, logged as no outage), while a server
that cannot be reached still gets ``BackendUnavailable``.

A place taken costs one semaphore step when one is free (no timer, no suspension),
and the script lane, which carries the workers' hot path, takes none.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

from redis.asyncio.connection import ConnectionPool

from fleet.core.errors import BackendBusy

#: Connections of one command pool (redis-py's own default); ``?max_connections=``
#: in the backend URL sets another.
POOL_CONNECTIONS = 100
#: Seconds a call waits for a connection of a full pool before ``BackendBusy``.
POOL_WAIT_SECONDS = 10.0


class ConnectionQueue:
    """Places for calls on one pool's connections, handed out in arrival order.

    Args:
        size: How many calls may hold a connection at once.
        wait_seconds: How long a call waits for a place before ``BackendBusy``.
        where: The backend's address without credentials, for the error.
    """

    __slots__ = ("_free", "size", "wait_seconds", "where")

    def __init__(self, size: int, wait_seconds: float, where: str) -> None:
        self.size = size
        self.wait_seconds = wait_seconds
        self.where = where
        self._free = asyncio.Semaphore(size)

    @property
    def waiting(self) -> bool:
        """True while every place is taken."""
        return self._free.locked()

    async def acquire(self) -> None:
        """Take a place, waiting for one if none is free.

        Raises:
            BackendBusy: No place came free within ``wait_seconds``.
        """
        if not self._free.locked():
            await self._free.acquire()  # free: returns without suspending
            return
        try:
            async with asyncio.timeout(self.wait_seconds):
                await self._free.acquire()
        except TimeoutError:
            raise BackendBusy(
                f"redis at {self.where}: all {self.size} connections of this process stayed "
                f"in use for {self.wait_seconds:g} s (busy, not down); retry later"
            ) from None

    def release(self) -> None:
        """Give a place back."""
        self._free.release()


class QueuedPoolMixin:
    """Put before a redis-py asyncio pool class: ``get_connection`` waits for a place
    of the pool's :class:`ConnectionQueue`, ``release`` gives it back.

    The connection handed out is remembered, so a connection the pool releases on
    its own (its own failed ``get_connection``) gives back no place it never took.
    """

    max_connections: int
    _fleet_queue: ConnectionQueue
    _fleet_held: set[Any]

    def _fleet_init(self, wait_seconds: float, where: str) -> None:
        self._fleet_queue = ConnectionQueue(self.max_connections, wait_seconds, where)
        self._fleet_held = set()

    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        await self._fleet_queue.acquire()
        try:
            connection = await super().get_connection(*args, **kwargs)  # type: ignore[misc]
        except BaseException:
            self._fleet_queue.release()
            raise
        self._fleet_held.add(connection)
        return connection

    async def release(self, connection: Any) -> None:
        try:
            await super().release(connection)  # type: ignore[misc]
        finally:
            if connection in self._fleet_held:
                self._fleet_held.discard(connection)
                self._fleet_queue.release()


class QueuedPool(QueuedPoolMixin, ConnectionPool):
    """redis-py's pool for one server, with a queue in front (see the module).

    Args:
        queue_wait: Seconds a call waits for a connection (``POOL_WAIT_SECONDS``).
        queue_where: The backend's address without credentials, for the error.
        kwargs: The pool's own (``max_connections`` defaults to ``POOL_CONNECTIONS``).
    """

    def __init__(
        self,
        *,
        queue_wait: float = POOL_WAIT_SECONDS,
        queue_where: str = "",
        **kwargs: Any,
    ) -> None:
        kwargs["max_connections"] = kwargs.get("max_connections") or POOL_CONNECTIONS
        super().__init__(**kwargs)
        self._fleet_init(queue_wait, queue_where)


#: Set in a task while it holds a place of a cluster client's queue: a call the
#: cluster client makes from inside another (a pipeline retrying one command after a
#: redirection) takes no second place, so it cannot wait for itself.
_HOLDING: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "fleet_redis_holding", default=False
)


async def queued_call(queue: ConnectionQueue, call: Any, *args: Any, **kwargs: Any) -> Any:
    """``await call(*args, **kwargs)`` holding a place of ``queue`` (none if this task
    already holds one)."""
    if _HOLDING.get():
        return await call(*args, **kwargs)
    await queue.acquire()
    token = _HOLDING.set(True)
    try:
        return await call(*args, **kwargs)
    finally:
        _HOLDING.reset(token)
        queue.release()


__all__ = [
    "POOL_CONNECTIONS",
    "POOL_WAIT_SECONDS",
    "ConnectionQueue",
    "QueuedPool",
    "QueuedPoolMixin",
    "queued_call",
]
