"""The Backend interface: the only code that touches storage.

Every method below is a contract; its docstring is the specification that the
conformance suite (``tests/conformance``) checks against every implementation.
Implementations: ``memory://`` (one process), ``sqlite:///path`` (one host),
``redis://``/``rediss://`` (a fleet). Others register under the entry-point group
``fleet.backends``.

Conventions shared by every method:

* Time is Unix seconds (float) from :func:`fleet.backends.records.now`.
* Every write is atomic: a crash at any point leaves either the state before or
  the state after the call, never a half-written task.
* "Type" means automation type; queue, stream and worker keys are per type.
* JSON values are ``dict``/``list``/``str``/numbers/bools/None; backends encode
  them with :func:`fleet.backends.records.dumps`.
* A backend that cannot be reached raises :class:`fleet.core.errors.BackendUnavailable`
  (never hangs forever, never leaks a driver exception).
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Sequence
from typing import Any

from fleet.backends.records import (
    CancelOutcome,
    LeaseStatus,
    NackOutcome,
    PoolClaim,
    PoolItem,
    PoolStats,
    PoolStrategy,
    PushRequest,
    PushResult,
    QueueDepths,
    Reservation,
    StreamEntry,
    TaskBody,
    TaskInfo,
    WorkerRecord,
)

#: Default bounds of an output stream (spec: 50,000 entries, 3,600 s).
STREAM_MAX_LEN = 50_000
STREAM_MAX_AGE = 3600.0


class Subscription(abc.ABC):
    """A live subscription to event topics; iterate it for ``(topic, message)``.

    Messages published before the subscription was established are not seen.
    ``aclose`` ends the iteration and frees the backend's resources.
    """

    def __aiter__(self) -> AsyncIterator[tuple[str, Any]]:
        return self

    @abc.abstractmethod
    async def __anext__(self) -> tuple[str, Any]: ...

    @abc.abstractmethod
    async def aclose(self) -> None: ...

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class Backend(abc.ABC):
    """Abstract storage for queues, streams, pools, primitives and fleet state.

    Create one with :func:`fleet.backends.open_backend`; call :meth:`connect`
    before use (``open_backend`` does) and :meth:`close` when done. One instance
    is safe to share between all asyncio tasks of one event loop.
    """

    url: str

    # ------------------------------------------------------------ lifecycle
    async def connect(self) -> None:  # noqa: B027 - optional hook
        """Open connections / files and create schema. Idempotent."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release every connection, file and waiter. Idempotent."""

    @abc.abstractmethod
    async def ping(self) -> bool:
        """True if the storage answers now; False (never raises) otherwise."""

    # ------------------------------------------------------------ task queues
    @abc.abstractmethod
    async def push(self, automation_type: str, requests: Sequence[PushRequest]) -> list[PushResult]:
        """Enqueue tasks, one result per request, in order; atomic per request.

        A request without delay goes to the tail of its priority tier; with
        ``delay_seconds > 0`` to ``:scheduled`` (ready at now + delay). A request
        with an ``idempotency_key`` that is still live for this type enqueues
        nothing and answers ``(original_id, queued=False, duplicate=True)`` —
        exactly one of any number of concurrent pushes with one key is queued.
        A push whose task id is already queued, scheduled or processing in this
        type is also refused as a duplicate (same answer shape). Each queued
        task increments ``counters.submitted`` and wakes one blocked reserver.
        """

    @abc.abstractmethod
    async def reserve(
        self,
        automation_type: str,
        *,
        k: int = 1,
        visibility_seconds: float = 300.0,
        timeout: float = 0.0,
        default_max_attempts: int = 3,
    ) -> list[Reservation]:
        """Take up to ``k`` pending tasks, each under a new lease.

        Order: first moves due ``:scheduled`` tasks to the tail of their tier;
        then pops high tier before normal before low, FIFO within a tier.
        For each popped body, atomically with the pop:

        * a cancelled task is dropped (state ``cancelled``);
        * a task past its ``ttl_seconds`` is dropped (state ``unknown``),
          ``counters.expired`` += 1;
        * otherwise a body whose ``max_attempts`` is None gets
          ``default_max_attempts`` (stored, so nack and later reserves see it);
          ``attempt`` += 1; if that exceeds ``max_attempts`` (earlier
          attempts were lost with their worker) the task is dead-lettered with
          ``last_error`` saying so and not delivered;
        * else it is registered in ``:processing`` with a fresh token and
          ``deadline = now + visibility_seconds`` and returned.

        If nothing is deliverable, waits up to ``timeout`` seconds for a push or
        a scheduled task coming due, without polling in a tight loop; returns
        ``[]`` on timeout. ``timeout=0`` never waits. Cancellation of the calling
        asyncio task while waiting loses no task.
        """

    @abc.abstractmethod
    async def ack(self, automation_type: str, leases: Sequence[tuple[str, str]]) -> list[bool]:
        """Finish tasks: for each ``(task_id, token)`` answer True if it was owned.

        An owned task leaves ``:processing`` and becomes ``done`` (or
        ``cancelled`` if a cancel was requested while it ran);
        ``counters.completed`` += 1 (``counters.cancelled`` instead for a
        cancelled one). A stale token (the lease expired and was
        swept, or another reservation holds it) changes nothing and answers False.
        """

    @abc.abstractmethod
    async def nack(
        self,
        automation_type: str,
        task_id: str,
        token: str,
        *,
        delay_seconds: float,
        error: str | None = None,
        traceback: str | None = None,
        dead: bool = False,
    ) -> NackOutcome:
        """Fail the current attempt of an owned task.

        If ``dead`` is set or ``attempt >= max_attempts``: move the body, with
        ``last_error``/``traceback``/``failed_at`` set, to the DLQ (``dead``;
        ``counters.dead`` += 1). Otherwise schedule it at now + ``delay_seconds``
        in ``:scheduled`` keeping its priority (``retry``; ``counters.failed`` += 1).
        A stale token changes nothing (``stale``).
        """

    @abc.abstractmethod
    async def release(self, automation_type: str, task_id: str, token: str) -> bool:
        """Give an owned task back unfinished: refund its attempt and put it at the
        *head* of its tier (used on shutdown). False, and no change, if stale."""

    @abc.abstractmethod
    async def extend(
        self, automation_type: str, task_id: str, token: str, visibility_seconds: float
    ) -> LeaseStatus:
        """Push an owned lease's deadline to now + ``visibility_seconds``.

        ``STALE`` if the token does not own the task (no change); ``CANCELLED``
        if it does but a cancel was requested (the deadline is still extended, so
        the slot can stop the task and ack it).
        """

    @abc.abstractmethod
    async def sweep(self, automation_type: str) -> int:
        """Re-queue every reservation past its deadline at the head of its tier
        (the attempt stays charged), and move due scheduled tasks to their tier.
        Returns how many reservations were re-queued. A lease extended or acked
        concurrently is never re-queued."""

    @abc.abstractmethod
    async def dead_peek(self, automation_type: str, n: int = 50) -> list[TaskBody]:
        """Up to ``n`` dead-lettered bodies, oldest death first, not removed."""

    @abc.abstractmethod
    async def dead_replay(
        self, automation_type: str, *, n: int | None = None, task_ids: Sequence[str] | None = None
    ) -> int:
        """Move dead tasks back to the tail of their tier with ``attempt=0``,
        keeping priority and payload; ``last_error`` is kept for the record.
        ``task_ids`` selects by id; else the ``n`` oldest (all if None).
        Returns how many were replayed."""

    @abc.abstractmethod
    async def dead_clear(self, automation_type: str) -> int:
        """Remove every dead-lettered task; returns how many."""

    @abc.abstractmethod
    async def depths(self, automation_type: str) -> QueueDepths:
        """Sizes by tier and state, the oldest pending task's age, and counters."""

    @abc.abstractmethod
    async def task_state(self, automation_type: str, task_id: str) -> TaskInfo:
        """Where one task is (queued|scheduled|processing|dead|done|cancelled|unknown)
        and its attempt count, without scanning the queue."""

    @abc.abstractmethod
    async def cancel(self, automation_type: str, task_id: str) -> CancelOutcome:
        """Cancel a task: a queued or scheduled one is removed for good
        (``cancelled``); a processing one is flagged so the holder's next
        :meth:`extend` answers ``CANCELLED`` (``cancelling``); anything else
        (dead, done, unknown) answers ``not_found``. ``counters.cancelled`` += 1
        when a task is removed or its cancel is acked."""

    @abc.abstractmethod
    async def purge_type(self, automation_type: str) -> None:
        """Delete every piece of state of a type: queue (all tiers and states),
        task states, idempotency keys, counters, stream, catalog entry, config
        and worker records (``wkr:<type>:*``, ``wkrs:<type>`` and its
        ``wkrs:all`` members)."""

    # ------------------------------------------------------------ streams
    @abc.abstractmethod
    async def stream_push(
        self,
        automation_type: str,
        payload: Any,
        *,
        worker_id: str,
        max_len: int = STREAM_MAX_LEN,
        max_age: float = STREAM_MAX_AGE,
    ) -> StreamEntry:
        """Append an entry (new :func:`stream_entry_id`, ts = now), then trim the
        stream to entries younger than ``max_age`` and to the newest ``max_len``.
        Also publishes the entry on the event topic ``<type>.emit``."""

    @abc.abstractmethod
    async def stream_pop(self, automation_type: str, n: int = 1) -> list[StreamEntry]:
        """Remove and return the ``n`` oldest entries. Each entry goes to exactly
        one of any number of concurrent poppers."""

    @abc.abstractmethod
    async def stream_peek(self, automation_type: str, n: int = 10) -> list[StreamEntry]:
        """The ``n`` oldest entries, oldest first, not removed."""

    @abc.abstractmethod
    async def stream_read(
        self, automation_type: str, *, after: str | None = None, n: int = 100
    ) -> list[StreamEntry]:
        """Up to ``n`` entries with id > ``after`` (all if None), oldest first, not
        removed. Pass the last entry's id as the next ``after``."""

    @abc.abstractmethod
    async def stream_tail(self, automation_type: str, n: int = 20) -> list[StreamEntry]:
        """The ``n`` newest entries, oldest first, not removed (for live views)."""

    @abc.abstractmethod
    async def stream_len(self, automation_type: str) -> int:
        """Number of entries (expired ones may count until the next push trims)."""

    # ------------------------------------------------------------ pools
    @abc.abstractmethod
    async def pool_put(
        self,
        name: str,
        payload: Any,
        tags: dict[str, Any],
        *,
        ttl_seconds: float | None = None,
        item_id: str | None = None,
    ) -> str:
        """Insert an item (new id) or replace the item ``item_id`` (an existing
        claim on it is kept). Expires at now + ttl if given. Prunes expired
        items. Returns the item id."""

    @abc.abstractmethod
    async def pool_claim(
        self,
        name: str,
        *,
        where: dict[str, Any] | None = None,
        hold_seconds: float = 60.0,
        strategy: PoolStrategy = "freshest",
    ) -> PoolClaim | None:
        """Claim one unclaimed, unexpired item whose tags equal every ``where``
        field: the one expiring last (``freshest``; never-expiring items count as
        freshest), expiring first (``oldest``) or any (``random``). The claim is an
        exclusive lease until now + ``hold_seconds`` with a new token. None if no
        item matches. Cost must not grow with the pool's size."""

    @abc.abstractmethod
    async def pool_release(self, name: str, item_id: str, token: str) -> bool:
        """End a claim early if ``token`` still holds it; False and no change else."""

    @abc.abstractmethod
    async def pool_evict(self, name: str, item_id: str, token: str) -> bool:
        """Remove a claimed item for good if ``token`` still holds it; else False."""

    @abc.abstractmethod
    async def pool_extend(self, name: str, item_id: str, token: str, hold_seconds: float) -> bool:
        """Extend a held claim to now + ``hold_seconds``; False if the token lost it."""

    @abc.abstractmethod
    async def pool_list(
        self, name: str, *, where: dict[str, Any] | None = None, n: int = 50
    ) -> list[PoolItem]:
        """Up to ``n`` unclaimed, unexpired items matching ``where``, freshest first."""

    @abc.abstractmethod
    async def pool_size(self, name: str, *, where: dict[str, Any] | None = None) -> int:
        """Count of unclaimed, unexpired items matching ``where``."""

    @abc.abstractmethod
    async def pool_remove(self, name: str, item_id: str) -> bool:
        """Remove an item whatever its claim; True if it existed."""

    @abc.abstractmethod
    async def pool_prune(self, name: str) -> int:
        """Remove expired items (and stale claim records); returns how many items."""

    @abc.abstractmethod
    async def pool_names(self) -> list[str]:
        """Names of pools that hold at least one item, sorted."""

    @abc.abstractmethod
    async def pool_stats(self, name: str) -> PoolStats:
        """Counts of one pool (zeros for an unknown pool)."""

    @abc.abstractmethod
    async def pool_drop(self, name: str) -> int:
        """Delete a pool, its indexes and claims; returns how many items it had."""

    # ------------------------------------------------------------ kv
    @abc.abstractmethod
    async def kv_set(
        self, ns: str, key: str, value: str, *, ttl_seconds: float | None = None
    ) -> None:
        """Store ``value`` under (ns, key), replacing any value and TTL."""

    @abc.abstractmethod
    async def kv_setnx(
        self, ns: str, key: str, value: str, *, ttl_seconds: float | None = None
    ) -> bool:
        """Store only if absent (or expired); True if stored. Atomic across callers."""

    @abc.abstractmethod
    async def kv_get(self, ns: str, key: str) -> str | None:
        """The live value, or None if absent or expired."""

    @abc.abstractmethod
    async def kv_delete(self, ns: str, key: str) -> bool:
        """Delete; True if a live value existed."""

    # ------------------------------------------------------------ locks
    @abc.abstractmethod
    async def lock_acquire(self, name: str, token: str, hold_seconds: float) -> bool:
        """Take the lock for ``hold_seconds`` if free (or expired); True if taken.
        Never waits: waiting and renewal live in the lock handle."""

    @abc.abstractmethod
    async def lock_renew(self, name: str, token: str, hold_seconds: float) -> bool:
        """Extend the lock to now + ``hold_seconds`` if ``token`` holds it."""

    @abc.abstractmethod
    async def lock_release(self, name: str, token: str) -> bool:
        """Free the lock only if ``token`` holds it; True if it did."""

    # ------------------------------------------------------------ counters
    @abc.abstractmethod
    async def counter_incr(self, name: str, n: int = 1) -> int:
        """Add ``n`` (may be negative) atomically; returns the new value (absent = 0)."""

    @abc.abstractmethod
    async def counter_get(self, name: str) -> int:
        """The value (0 if absent)."""

    @abc.abstractmethod
    async def counter_set(self, name: str, value: int) -> None:
        """Set the value."""

    @abc.abstractmethod
    async def counter_delete(self, name: str) -> None:
        """Delete the counter (it reads 0 afterwards)."""

    # ------------------------------------------------------------ events
    @abc.abstractmethod
    async def publish(self, topic: str, message: Any) -> None:
        """Fire-and-forget: deliver a JSON message to every current subscriber of
        ``topic`` (Redis channel ``event:<topic>``). No persistence."""

    @abc.abstractmethod
    async def subscribe(self, *topics: str) -> Subscription:
        """Start listening to ``topics``; returns once the subscription is live, so
        anything published after this call returns is delivered."""

    # ------------------------------------------------------------ catalog
    @abc.abstractmethod
    async def catalog_put(self, automation_type: str, entry: dict[str, Any]) -> None:
        """Write one catalog entry (``fleet:catalog`` hash field)."""

    @abc.abstractmethod
    async def catalog_get(self, automation_type: str) -> dict[str, Any] | None:
        """One catalog entry or None."""

    @abc.abstractmethod
    async def catalog_all(self) -> dict[str, dict[str, Any]]:
        """Every catalog entry by type."""

    @abc.abstractmethod
    async def catalog_delete(self, automation_type: str) -> None:
        """Remove one catalog entry."""

    # ------------------------------------------------------------ workers
    @abc.abstractmethod
    async def worker_register(
        self, automation_type: str, worker_id: str, hardware: dict[str, Any]
    ) -> None:
        """Write ``wkr:<type>:<id>:hardware`` and add the id to ``wkrs:<type>`` and
        ``<type>|<id>`` to ``wkrs:all``."""

    @abc.abstractmethod
    async def worker_set_state(
        self, automation_type: str, worker_id: str, fields: dict[str, str]
    ) -> None:
        """Merge fields into ``wkr:<type>:<id>:state`` (state, last_seen, ...)."""

    @abc.abstractmethod
    async def worker_put_stats(
        self, automation_type: str, worker_id: str, stats: dict[str, Any]
    ) -> None:
        """Replace ``wkr:<type>:<id>:stats`` with the JSON stats frame."""

    @abc.abstractmethod
    async def worker_get(self, automation_type: str, worker_id: str) -> WorkerRecord | None:
        """Everything about one worker, or None if it was never registered."""

    @abc.abstractmethod
    async def worker_ids(self, automation_type: str) -> list[str]:
        """Every worker id ever registered for the type (``wkrs:<type>``), sorted."""

    @abc.abstractmethod
    async def workers_all(self) -> list[tuple[str, str]]:
        """Every ``(type, worker_id)`` in ``wkrs:all``, sorted."""

    @abc.abstractmethod
    async def worker_forget(self, automation_type: str, worker_id: str) -> None:
        """Delete the worker's ``wkr:`` keys and its index entries."""

    # ------------------------------------------------------------ config
    @abc.abstractmethod
    async def config_get(
        self, automation_type: str, worker_id: str | None = None
    ) -> dict[str, Any]:
        """The stored type-wide config (``worker_id`` None) or one worker's override
        ({} if none). These are partial dicts; merging is the caller's job."""

    @abc.abstractmethod
    async def config_set(
        self, automation_type: str, config: dict[str, Any], worker_id: str | None = None
    ) -> None:
        """Replace the type-wide config or one worker's override."""

    @abc.abstractmethod
    async def next_generation(self, automation_type: str) -> int:
        """Increment and return the type's config generation counter. Generations
        are unique and strictly increasing per type, across masters."""

    @abc.abstractmethod
    async def worker_config_put(
        self, automation_type: str, worker_id: str, config: dict[str, Any], gen: int
    ) -> bool:
        """Write the desired merged config and its generation to
        ``wkr:<type>:<id>:config`` / ``:gen`` if ``gen`` is higher than the stored
        one; True if written. Atomic (config and gen change together)."""

    @abc.abstractmethod
    async def worker_config_get(
        self, automation_type: str, worker_id: str
    ) -> tuple[dict[str, Any] | None, int]:
        """The desired merged config of a worker and its generation (None, 0 if none)."""

    # ------------------------------------------------------------ helpers
    async def push_one(self, automation_type: str, request: PushRequest) -> PushResult:
        """Push a single request (see :meth:`push`)."""
        return (await self.push(automation_type, [request]))[0]

    async def __aenter__(self) -> Backend:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
