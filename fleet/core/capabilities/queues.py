"""Task queues: push, reserve under a lease, ack/nack/release/extend, sweep, the DLQ."""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fleet.core.call_batch import CallBatch
from fleet.core.records import (
    CancelOutcome,
    LeaseStatus,
    NackOutcome,
    PushRequest,
    PushResult,
    QueueDepths,
    Reservation,
    TaskBody,
    TaskInfo,
    now,
)

#: Most single pushes (:meth:`TaskQueues.push_one`) that waited for one in flight
#: sent as one :meth:`TaskQueues.push` (one atomic step: one script call, one transaction).
ONE_BY_ONE_BATCH = 100

#: The one logger of what every backend reports on its own (TTL drops at reserve).
log = logging.getLogger("fleet.backends")

#: A reserver waiting for a scheduled task (or a held group) wakes this long after
#: its due time, so the step it then runs sees it due whatever the clocks' rounding.
DUE_SLACK = 0.002


def log_expired(automation_type: str, task_id: str, age: float | None, ttl: float | None) -> None:
    """Log (INFO) a task that ``reserve`` dropped because it outlived its ``ttl_seconds``.

    Every backend reports the drops of its take step (:class:`Taken`) and the base
    class logs them here, after the step (a Redis script cannot log), so the line is
    the same everywhere. ``age`` (seconds from its submission to the drop) or ``ttl``
    is None when the backend could not read it back (a body pushed by hand into a
    Redis list); the line then shows ``?``.
    """
    log.info(
        "task %s of %s expired unstarted after %ss in the queue (ttl %ss)",
        task_id,
        automation_type,
        "?" if age is None else f"{age:.1f}",
        "?" if ttl is None else f"{ttl:g}",
    )


@dataclass(frozen=True, slots=True)
class Taken:
    """What one take step of a backend did (:meth:`TaskQueues._take`).

    Attributes:
        reservations: The tasks taken, each under its new lease.
        next_due: When the next scheduled task (or held group) comes due, if that
            is what there is to wait for.
        signal: The backend's wake-up counter as the step read it (the SQLite
            backend wakes waiters on its change); 0 where unused.
        expired: ``(task_id, age, ttl)`` of each task dropped for its ttl.
    """

    reservations: list[Reservation]
    next_due: float | None = None
    signal: int = 0
    expired: tuple[tuple[str, float | None, float | None], ...] = field(default=())


class TaskQueues(abc.ABC):
    """Reliable per-type task queues (the batch automations' input).

    :meth:`reserve` is written here once, over two primitives of each backend:
    :meth:`_take` (one atomic step) and :meth:`_wait_for_work` (block until a
    wake-up or a timeout).
    """

    #: Single pushes by type, batched while one is in flight (see :meth:`push_one`).
    _one_by_one: CallBatch[str, PushRequest, PushResult]

    #: Whether a take can outlive its caller's cancellation with tasks taken (a
    #: script call in flight, a transaction in its thread): the take is then
    #: shielded, and what it took is released, so no task waits for its lease.
    take_outlives_cancel: ClassVar[bool] = True

    @property
    @abc.abstractmethod
    def _closed(self) -> bool:
        """True once the backend is closed: a waiting reserve returns ``[]``."""

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

        Order: first moves due ``:scheduled`` tasks to the tail of their tier (or
        of their group); then pops high tier before normal before low, FIFO
        within a tier. Tasks with a group are served by the rule of
        :mod:`fleet.core.capabilities.groups` (fair across groups, within each
        group's budget; a group without settings of its own takes the type's
        limits stored by ``TaskGroups.set_defaults``, read in the same
        atomic step).
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

        If nothing is deliverable, waits up to ``timeout`` seconds for a push,
        a scheduled task coming due or a group getting budget back, without
        polling in a tight loop; returns ``[]`` on timeout. ``timeout=0`` never
        waits. Cancellation of the calling asyncio task while waiting loses no
        task.
        """
        loop = asyncio.get_running_loop()
        give_up = loop.time() + max(timeout, 0.0)
        while True:
            taken = await self._take_once(
                automation_type, k, visibility_seconds, default_max_attempts
            )
            if taken.reservations or timeout <= 0 or self._closed:
                return taken.reservations
            left = give_up - loop.time()
            if left <= 0:
                return []
            bounded = taken.next_due is not None and taken.next_due - now() < left
            if taken.next_due is not None and bounded:
                left = max(taken.next_due - now(), 0.0) + DUE_SLACK
            woken = await self._wait_for_work(automation_type, taken.signal, left)
            if self._closed:
                return []
            if not woken and not bounded:
                # The wait used up the caller's time with no wake-up and nothing
                # came due: an idle reserver costs one take and one wait per timeout.
                return []

    async def _take_once(
        self, automation_type: str, k: int, visibility_seconds: float, default_max_attempts: int
    ) -> Taken:
        """One :meth:`_take`, shielded from the caller's cancellation where it can
        outlive it (what it took is then released), its ttl drops logged."""
        if not self.take_outlives_cancel:
            taken = await self._take(automation_type, k, visibility_seconds, default_max_attempts)
        else:
            job = asyncio.ensure_future(
                self._take(automation_type, k, visibility_seconds, default_max_attempts)
            )
            try:
                taken = await asyncio.shield(job)
            except asyncio.CancelledError:
                job.add_done_callback(lambda j: self._release_orphans(automation_type, j))
                raise
        for task_id, age, ttl in taken.expired:
            log_expired(automation_type, task_id, age, ttl)
        return taken

    def _release_orphans(self, automation_type: str, job: asyncio.Future[Taken]) -> None:
        """Give back (attempt refunded, at the head of its tier) what a take whose
        caller was cancelled took."""
        if job.cancelled() or job.exception() is not None:
            return
        taken = job.result()
        for task_id, age, ttl in taken.expired:
            log_expired(automation_type, task_id, age, ttl)
        pending: set[asyncio.Task[Any]] = self.__dict__.setdefault("_orphan_releases", set())
        for res in taken.reservations:
            task = asyncio.ensure_future(self.release(automation_type, res.body.id, res.token))
            pending.add(task)
            task.add_done_callback(pending.discard)

    @abc.abstractmethod
    async def _take(
        self, automation_type: str, k: int, visibility_seconds: float, default_max_attempts: int
    ) -> Taken:
        """One atomic reserve step (the rules of :meth:`reserve`, no waiting)."""

    @abc.abstractmethod
    async def _wait_for_work(self, automation_type: str, signal: int, seconds: float) -> bool:
        """Block until a push, a release or a group's budget wakes this type's
        reservers (True), or ``seconds`` pass (False). ``signal`` is the
        :attr:`Taken.signal` of the step that found nothing."""

    @abc.abstractmethod
    async def ack(
        self,
        automation_type: str,
        leases: Sequence[tuple[str, str]],
        *,
        worker_id: str | None = None,
    ) -> list[bool]:
        """Finish tasks: for each ``(task_id, token)`` answer True if it was owned.

        An owned task leaves ``:processing`` and becomes ``done`` (or
        ``cancelled`` if a cancel was requested while it ran);
        ``counters.completed`` += 1 (``counters.cancelled`` instead for a
        cancelled one). A stale token (the lease expired and was
        swept, or another reservation holds it) changes nothing and answers False.
        ``worker_id``: the worker that ran them (its record's last attempt names it).
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
        worker_id: str | None = None,
        started_at: float | None = None,
    ) -> NackOutcome:
        """Fail the current attempt of an owned task.

        If ``dead`` is set or ``attempt >= max_attempts``: move the body, with
        ``last_error``/``traceback``/``failed_at`` set, to the DLQ (``dead``;
        ``counters.dead`` += 1). Otherwise schedule it at now + ``delay_seconds``
        in ``:scheduled`` keeping its priority (``retry``; ``counters.failed`` += 1).
        A stale token changes nothing (``stale``). The attempt is added to the
        record's attempts (:mod:`fleet.core.attempts`) with ``worker_id`` and
        ``started_at`` (else the reservation's start mark's).
        """

    @abc.abstractmethod
    async def release(self, automation_type: str, task_id: str, token: str) -> bool:
        """Give an owned task back unfinished: refund its attempt and put it at the
        *head* of its tier (used on shutdown). False, and no change, if stale.
        Not counted in ``refunds``: a release is a worker's own decision, not a
        loss."""

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
    async def mark_started(
        self,
        automation_type: str,
        leases: Sequence[tuple[str, str]],
        *,
        worker_id: str | None = None,
    ) -> list[bool]:
        """Record that each ``(task_id, token)`` reservation began to run, one answer
        per lease, in order: True if the token owns the task (it is now marked),
        False if stale (no change). Marking twice is harmless (True again).

        A mark belongs to one reservation: reserve starts every reservation
        unmarked, and a mark never outlives the lease it was made under (ack,
        nack, release and sweep end it). Workers send the marks of the tasks
        their slots started, batched, without waiting for the answer; what the
        mark changes is how :meth:`sweep` settles the reservation if its lease
        runs out. The mark keeps ``worker_id`` (a task's page says where it runs; a
        lost attempt, where it was lost).
        """

    @abc.abstractmethod
    async def sweep(self, automation_type: str) -> int:
        """Re-queue every reservation past its deadline at the head of its tier,
        and move due scheduled tasks to their tier. Returns how many reservations
        were re-queued. A lease extended or acked concurrently is never re-queued.

        The attempt a re-queued reservation charged stays charged if it was
        marked started (:meth:`mark_started`): the task ran when its worker was
        lost. A reservation never marked started died unstarted with its worker
        (held by a prefetch, or beside a task that killed the process): its
        attempt is refunded (``attempt`` -= 1, ``refunds`` += 1), unless the
        body's ``refunds`` already reached ``refund_cap(max_attempts)``
        (``max(max_attempts, 2)``), in which case the attempt stays charged. So
        a task does not run out of attempts for losses it did not run in, and a
        task that kills its process before its mark lands still reaches the DLQ,
        after at most ``max_attempts + refund_cap(max_attempts)`` deliveries.
        """

    @abc.abstractmethod
    async def dead_peek(self, automation_type: str, n: int = 50) -> list[TaskBody]:
        """Up to ``n`` dead-lettered bodies, oldest death first, not removed."""

    @abc.abstractmethod
    async def dead_replay(
        self, automation_type: str, *, n: int | None = None, task_ids: Sequence[str] | None = None
    ) -> int:
        """Move dead tasks back to the tail of their tier with ``attempt=0`` and
        ``refunds=0``, keeping priority and payload; ``last_error`` is kept for
        the record.
        ``task_ids`` selects by id; else the ``n`` oldest (all if None).
        Returns how many were replayed."""

    @abc.abstractmethod
    async def dead_clear(self, automation_type: str) -> int:
        """Remove every dead-lettered task; returns how many."""

    @abc.abstractmethod
    async def depths(self, automation_type: str) -> QueueDepths:
        """Sizes by tier and state, the oldest pending task's age, and counters."""

    @abc.abstractmethod
    async def state(self, automation_type: str, task_id: str) -> TaskInfo:
        """Where one task is (queued|scheduled|processing|dead|done|cancelled|unknown)
        and its attempt count, without scanning the queue."""

    @abc.abstractmethod
    async def cancel(self, automation_type: str, task_id: str) -> CancelOutcome:
        """Cancel a task: a queued or scheduled one is removed for good
        (``cancelled``); a processing one is flagged so the holder's next
        :meth:`extend` answers ``CANCELLED`` (``cancelling``); anything else
        (dead, done, unknown) answers ``not_found``. ``counters.cancelled`` += 1
        when a task is removed or its cancel is acked."""

    async def push_one(self, automation_type: str, request: PushRequest) -> PushResult:
        """Push a single request (see :meth:`push`).

        Single pushes of a type made while one is in flight (slots that submit at
        once, concurrent REST submits) wait for it and then go as one :meth:`push`
        of up to ``ONE_BY_ONE_BATCH`` requests: one atomic step on every backend,
        so a step that fails fails only the pushes in it, none of them queued. A
        caller that pushes one at a time goes straight through.
        """
        batch: CallBatch[str, PushRequest, PushResult] | None = getattr(self, "_one_by_one", None)
        if batch is None:
            batch = self._one_by_one = CallBatch(self.push, ONE_BY_ONE_BATCH)
        return await batch.add(automation_type, request)
