"""Plain records the Backend interface passes in and out, and their wire forms.

Pure data and pure functions: no I/O here, so every backend and every test can
share them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Literal

from fleet.core import clock
from fleet.core.attempts import Attempt
from fleet.core.tracing import trace_id_of

Tier = Literal["high", "normal", "low"]
#: Reserve order: every high task before any normal one, every normal before any low.
TIERS: tuple[Tier, ...] = ("high", "normal", "low")


def tier_of(priority: int) -> Tier:
    """The queue tier of a priority: ``>0`` high, ``0`` normal, ``<0`` low."""
    if priority > 0:
        return "high"
    if priority < 0:
        return "low"
    return "normal"


#: Random bytes for ids, read from the OS 4 KiB at a time: one getrandom call per
#: 256 ids instead of one per id (system calls are what bulk submits pay most for).
_id_bytes = b""
_id_pos = 0
_UUID4_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))
_UUID4_SET = (0x4000 << 64) | (0x8000 << 48)


def _forget_id_bytes() -> None:
    # A forked child must never hand out the ids its parent is about to use.
    global _id_bytes, _id_pos
    _id_bytes, _id_pos = b"", 0


os.register_at_fork(after_in_child=_forget_id_bytes)


def new_id() -> str:
    """A fresh task/item id: uuid4 hex (122 bits from the OS's random source)."""
    global _id_bytes, _id_pos
    if _id_pos + 16 > len(_id_bytes):
        _id_bytes, _id_pos = os.urandom(4096), 0
    n = int.from_bytes(_id_bytes[_id_pos : _id_pos + 16], "big")
    _id_pos += 16
    return f"{(n & _UUID4_CLEAR) | _UUID4_SET:032x}"


def new_token() -> str:
    """A fresh lease token (unguessable, unique per reservation/claim/lock)."""
    return os.urandom(12).hex()


# json.dumps with options builds a new encoder per call; one shared encoder is
# the same encoding at a fraction of the cost per task.
_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def dumps(value: Any) -> str:
    """Compact JSON, the one encoding every backend stores."""
    return _encode(value)


def refund_cap(max_attempts: int | None) -> int:
    """How many lost attempts ``sweep`` refunds a task at most: ``max_attempts``,
    but never fewer than 2 (a task with one attempt must survive being lost
    unstarted twice beside a task that kills its process: once before that task
    is a suspect, once while it runs alone; see docs/batch-automations.md)."""
    return max(max_attempts or 0, 2)


@dataclass(frozen=True, slots=True)
class TaskBody:
    """A task as stored in a queue. Its JSON form is the queue's wire format.

    Attributes:
        id: Task id, unique within the automation type.
        payload: The JSON payload (validated into ``TaskPayload`` by the worker).
        priority: Tier selector, kept through retries, sweeps and replay.
        attempt: Attempts charged so far. Reserve adds one *before* delivery, so a
            delivered body carries the number of the attempt being made (1-based).
        max_attempts: Attempts allowed; a failure or a lost reservation of the last
            one dead-letters the task. None until reserve resolves it from the
            receiver's config (``reserve(default_max_attempts=...)``).
        enqueued_at: Unix time of the first submit (kept through retries).
        ttl_seconds: If set, a reserve later than ``enqueued_at + ttl_seconds``
            drops the task instead of delivering it (counted as ``expired``).
        last_error: The last failure's message (set by nack and dead-lettering).
        traceback: The last failure's traceback text.
        failed_at: Unix time of the last failure.
        refunds: Attempts given back by ``sweep`` because the reservation that
            charged them expired without ever being marked started (the task died
            unstarted with its worker). At most :func:`refund_cap`: past that,
            such losses stay charged, so a task that kills its process before its
            mark lands still reaches the DLQ.
        group: The flow-control group (a domain, an API key, a tenant): reserve
            applies the group's limits and serves groups round robin. None: no
            group, no limits (docs/flow-control.md).
        timeout_seconds: Time limit of one ``run_one`` of this task; wins over the
            receiver's ``Config.timeout_seconds``. None: the config's.
        traceparent: The W3C ``traceparent`` of the submit (``fleet.core.tracing``):
            each ``run_one`` of the task is traced as its child. None: not traced.
        run: The run the task belongs to (``fleet.core.runs``): its counters move
            with the task's. None: no run, no bookkeeping.
        attempts: The attempts that ended without finishing it, newest last, as
            stored (:mod:`fleet.core.attempts`; kept where the store keeps the body).
    """

    id: str
    payload: Any
    priority: int = 0
    attempt: int = 0
    max_attempts: int | None = None
    enqueued_at: float = 0.0
    ttl_seconds: float | None = None
    last_error: str | None = None
    traceback: str | None = None
    failed_at: float | None = None
    refunds: int = 0
    group: str | None = None
    timeout_seconds: float | None = None
    traceparent: str | None = None
    run: str | None = None
    attempts: tuple[Any, ...] = ()

    @property
    def tier(self) -> Tier:
        return tier_of(self.priority)

    def is_expired(self, now: float) -> bool:
        """True if the task's ``ttl_seconds`` has passed at ``now``."""
        return self.ttl_seconds is not None and now > self.enqueued_at + self.ttl_seconds

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "payload": self.payload,
            "priority": self.priority,
            "attempt": self.attempt,
            "max_attempts": self.max_attempts,
            "enqueued_at": self.enqueued_at,
        }
        if self.ttl_seconds is not None:
            out["ttl_seconds"] = self.ttl_seconds
        if self.last_error is not None:
            out["last_error"] = self.last_error
        if self.traceback is not None:
            out["traceback"] = self.traceback
        if self.failed_at is not None:
            out["failed_at"] = self.failed_at
        if self.refunds:
            out["refunds"] = self.refunds
        if self.group is not None:
            out["group"] = self.group
        if self.timeout_seconds is not None:
            out["timeout_seconds"] = self.timeout_seconds
        if self.traceparent is not None:
            out["traceparent"] = self.traceparent
        if self.run is not None:
            out["run"] = self.run
        if self.attempts:
            out["attempts"] = list(self.attempts)
        return out

    def to_json(self, *, enqueued_at: bool = True) -> str:
        """The stored form: ``to_dict()`` without the fields at their defaults
        (``priority`` 0, ``attempt`` 0, ``max_attempts`` None), which ``from_dict``
        puts back. A queued task is kept in a list and its record at once, and the
        record holds these fields; leaving them out saves 41 bytes of Redis memory
        per queued task (bench/queued_memory.py).

        ``enqueued_at=False`` leaves ``enqueued_at`` out too, for a store whose
        record keeps it (Redis: the record's submitted time; 34 bytes more)."""
        d = self.to_dict()
        if not self.priority:
            del d["priority"]
        if not self.attempt:
            del d["attempt"]
        if self.max_attempts is None:
            del d["max_attempts"]
        if not enqueued_at:
            del d["enqueued_at"]
        return dumps(d)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TaskBody:
        return cls(
            id=str(d["id"]),
            payload=d.get("payload"),
            priority=int(d.get("priority", 0)),
            attempt=int(d.get("attempt", 0)),
            max_attempts=None if d.get("max_attempts") is None else int(d["max_attempts"]),
            enqueued_at=float(d.get("enqueued_at", 0.0)),
            ttl_seconds=d.get("ttl_seconds"),
            last_error=d.get("last_error"),
            traceback=d.get("traceback"),
            failed_at=d.get("failed_at"),
            refunds=int(d.get("refunds") or 0),
            group=None if d.get("group") is None else str(d["group"]),
            timeout_seconds=d.get("timeout_seconds"),
            traceparent=_opt_str(d.get("traceparent")),
            run=_opt_str(d.get("run")),
            attempts=tuple(d["attempts"]) if isinstance(d.get("attempts"), list) else (),
        )

    @classmethod
    def from_json(cls, raw: str | bytes) -> TaskBody:
        return cls.from_dict(json.loads(raw))

    def evolve(self, **changes: Any) -> TaskBody:
        return replace(self, **changes)


@dataclass(frozen=True, slots=True)
class PushRequest:
    """One task to enqueue.

    Attributes:
        body: The task (``attempt`` should be 0).
        delay_seconds: If > 0 the task goes to ``:scheduled`` and becomes pending
            at ``now + delay_seconds``.
        idempotency_key: If set, a second push with the same (type, key) while the
            key lives returns the first task's id with ``duplicate=True`` and
            enqueues nothing.
        idempotency_ttl: How long the key lives (seconds).
        unique_key: With ``body.run``: a second push of the same key into the same
            run, for the run's lifetime, enqueues nothing and answers
            ``duplicate=True`` (counted in the run's ``duplicates``).
    """

    body: TaskBody
    delay_seconds: float = 0.0
    idempotency_key: str | None = None
    idempotency_ttl: float = 86_400.0
    unique_key: str | None = None


@dataclass(frozen=True, slots=True)
class PushResult:
    """Outcome of one :class:`PushRequest` (REST answers ``task_id``, ``queued`` and
    ``duplicate``).

    ``refused`` says why a push into a run was not queued when the push itself was
    wrong: ``"delay"``, delayed past the run's ``max_delay_seconds`` (``ctx.submit``
    raises for it). None otherwise (a run that ended refuses with None, as documented).
    """

    task_id: str
    queued: bool
    duplicate: bool
    refused: str | None = None


@dataclass(frozen=True, slots=True)
class Reservation:
    """A delivered task and its lease.

    Attributes:
        body: The task, ``attempt`` already charged for this delivery.
        token: The lease token; ack/nack/extend/release must present it.
        deadline: Unix time the lease runs out unless extended.
    """

    body: TaskBody
    token: str
    deadline: float


class LeaseStatus(StrEnum):
    """Answer of :meth:`TaskQueues.extend`."""

    OK = "ok"  #: the lease was extended
    STALE = "stale"  #: the token no longer owns the task (swept, acked, re-reserved)
    CANCELLED = "cancelled"  #: still owned, but a cancel was requested: stop and ack


NackOutcome = Literal["retry", "dead", "stale"]
CancelOutcome = Literal["cancelled", "cancelling", "not_found"]
TaskStateName = Literal["queued", "scheduled", "processing", "dead", "done", "cancelled", "unknown"]


@dataclass(frozen=True, slots=True)
class TaskInfo:
    """What :meth:`TaskQueues.state` knows of one task.

    ``done`` and ``cancelled`` are remembered for ``FLEET_RESULT_TTL_SECONDS``
    (at most ``FLEET_RESULT_MAX_PER_TYPE`` per type); after that, and for ids never
    seen, the state is ``unknown``. ``progress`` is the latest ``ctx.progress``
    report; ``outputs`` the newest emits of the task (at most
    :data:`fleet.core.results.RECORD_MAX_OUTPUTS`, oldest first, each with its
    stream entry id and attempt); ``outputs_total`` counts every emit.
    """

    task_id: str
    state: TaskStateName
    attempt: int = 0
    max_attempts: int = 0
    priority: int = 0
    last_error: str | None = None
    traceback: str | None = None  #: the last failure's traceback, where one was kept
    deadline: float | None = None  #: lease deadline while processing
    ready_at: float | None = None  #: when a scheduled task becomes pending
    finished_at: float | None = None  #: when it was acked / cancelled / dead-lettered
    submitted_at: float | None = None  #: when it was first submitted
    started_at: float | None = None  #: when its latest attempt began running
    progress: dict[str, Any] | None = None  #: {fraction, message, attempt, at}
    #: {id, ts, attempt, payload}, oldest first; a payload over
    #: :data:`~fleet.core.results.RECORD_OUTPUT_MAX_BYTES` as ``payload: None,
    #: truncated: True, bytes``
    outputs: tuple[dict[str, Any], ...] = ()
    outputs_total: int = 0
    trace_id: str | None = None  #: the trace its runs belong to (``[otel]``)
    #: Its attempts, oldest first (:mod:`fleet.core.attempts`; the newest ten that ended,
    #: and the one running or that finished it)
    attempts: tuple[Attempt, ...] = ()

    def with_extras(
        self,
        *,
        submitted_at: float | None = None,
        started_at: float | None = None,
        progress: dict[str, Any] | None = None,
        outputs: tuple[dict[str, Any], ...] = (),
        outputs_total: int = 0,
    ) -> TaskInfo:
        """This state with what the task's record keeps beside it."""
        if self.state == "unknown":
            return self
        return replace(
            self,
            submitted_at=self.submitted_at if submitted_at is None else submitted_at,
            started_at=started_at,
            progress=progress,
            outputs=outputs,
            outputs_total=max(outputs_total, len(outputs)),
        )

    @classmethod
    def of(
        cls,
        body: TaskBody,
        state: TaskStateName,
        *,
        deadline: float | None = None,
        ready_at: float | None = None,
        finished_at: float | None = None,
    ) -> TaskInfo:
        """What a stored body says of its task, in ``state``."""
        return cls(
            task_id=body.id,
            state=state,
            attempt=body.attempt,
            max_attempts=body.max_attempts or 0,
            priority=body.priority,
            last_error=body.last_error,
            traceback=body.traceback,
            deadline=deadline,
            ready_at=ready_at,
            finished_at=body.failed_at if state == "dead" and finished_at is None else finished_at,
            submitted_at=body.enqueued_at or None,
            trace_id=trace_id_of(body.traceparent),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "state": self.state,
            "attempt": self.attempt,
            "max_attempts": self.max_attempts,
            "priority": self.priority,
            "last_error": self.last_error,
            "traceback": self.traceback,
            "deadline": self.deadline,
            "ready_at": self.ready_at,
            "finished_at": self.finished_at,
            "submitted_at": self.submitted_at,
            "started_at": self.started_at,
            "progress": self.progress,
            "attempts": [a.to_dict() for a in self.attempts],
            "outputs": list(self.outputs),
            "outputs_total": self.outputs_total,
            "outputs_truncated": self.outputs_total > len(self.outputs)
            or any(o.get("truncated") for o in self.outputs),
            "trace_id": self.trace_id,
        }


#: How long ``done``/``cancelled`` task states are remembered by default (seconds;
#: ``FLEET_RESULT_TTL_SECONDS`` sets it, see :func:`fleet.core.results.result_ttl`).
FINISHED_RETENTION_SECONDS = 86400.0


@dataclass(frozen=True, slots=True)
class QueueCounters:
    """Monotonic per-type totals since the type's state was created."""

    submitted: int = 0
    completed: int = 0
    failed: int = 0  #: nacks that scheduled a retry
    dead: int = 0  #: tasks moved to the DLQ
    expired: int = 0  #: tasks dropped at reserve because their ttl passed
    cancelled: int = 0
    throttled: int = 0  #: reservations given back uncharged by ``throttle``


@dataclass(frozen=True, slots=True)
class QueueDepths:
    """Sizes of one type's queue, by state."""

    high: int = 0
    normal: int = 0
    low: int = 0
    processing: int = 0
    scheduled: int = 0
    dead: int = 0
    oldest_pending_age: float | None = None  #: seconds since the oldest pending task's submit
    counters: QueueCounters = field(default_factory=QueueCounters)

    @property
    def pending(self) -> int:
        return self.high + self.normal + self.low

    def to_dict(self) -> dict[str, Any]:
        return {
            "pending": {"high": self.high, "normal": self.normal, "low": self.low},
            "pending_total": self.pending,
            "processing": self.processing,
            "scheduled": self.scheduled,
            "dead": self.dead,
            "oldest_pending_age": self.oldest_pending_age,
            "counters": {
                "submitted": self.counters.submitted,
                "completed": self.counters.completed,
                "failed": self.counters.failed,
                "dead": self.counters.dead,
                "expired": self.counters.expired,
                "cancelled": self.counters.cancelled,
                "throttled": self.counters.throttled,
            },
        }


def stream_entry_id(ts: float) -> str:
    """A stream entry id that sorts by time: 16 hex digits of microseconds + 8 random hex."""
    return f"{int(ts * 1_000_000):016x}-{os.urandom(4).hex()}"


@dataclass(frozen=True, slots=True)
class StreamEntry:
    """One emitted output. ``id`` sorts like ``(ts, id)``; use it as a read cursor.

    ``task_id`` and ``attempt`` name the task attempt that emitted it (None for a
    continuous automation's emits): a consumer drops the outputs of an attempt that
    was redelivered and ran again."""

    id: str
    ts: float
    worker_id: str
    payload: Any
    task_id: str | None = None
    attempt: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "ts": self.ts,
            "worker_id": self.worker_id,
            "task_id": self.task_id,
            "attempt": self.attempt,
            "payload": self.payload,
        }

    def to_json(self) -> str:
        return dumps(self.to_dict())

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StreamEntry:
        return cls(
            id=str(d["id"]),
            ts=float(d["ts"]),
            worker_id=str(d.get("worker_id", "")),
            payload=d.get("payload"),
            task_id=_opt_str(d.get("task_id")),
            attempt=_opt_int(d.get("attempt")),
        )

    @classmethod
    def from_json(cls, raw: str | bytes) -> StreamEntry:
        return cls.from_dict(json.loads(raw))


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


PoolStrategy = Literal["freshest", "oldest", "random"]


@dataclass(frozen=True, slots=True)
class PoolItem:
    """One pool item. ``expires_at`` is None for items that never expire."""

    id: str
    payload: Any
    tags: dict[str, Any]
    expires_at: float | None
    created_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "payload": self.payload,
            "tags": self.tags,
            "expires_at": self.expires_at,
            "created_at": self.created_at,
        }


@dataclass(frozen=True, slots=True)
class PoolClaim:
    """A claimed pool item and the token of its lease."""

    item: PoolItem
    token: str
    lease_until: float


@dataclass(frozen=True, slots=True)
class PoolStats:
    """Counts of one pool. ``available`` excludes claimed and expired items."""

    name: str
    total: int
    available: int
    claimed: int
    expiring_soon: int  #: unexpired items whose expiry is within the next 60 s

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "total": self.total,
            "available": self.available,
            "claimed": self.claimed,
            "expiring_soon": self.expiring_soon,
        }


@dataclass(frozen=True, slots=True)
class WorkerRecord:
    """Everything the backend holds about one worker of one type (``wkr:`` keys).

    Backends build it with :func:`fleet.core.stored.worker_record`, which never
    raises: a stored part that cannot be read comes back empty and is named in
    ``unreadable`` (the worker's next heartbeat or config write replaces it).
    """

    automation_type: str
    worker_id: str
    hardware: dict[str, Any]
    config: dict[str, Any] | None  #: the desired merged config written for it
    gen: int  #: generation of ``config`` (0 if none was ever written)
    state: dict[str, str]  #: state, last_seen, last_error, applied_gen, ...
    stats: dict[str, Any] | None  #: the last stats frame
    #: parts whose stored value could not be read: hardware, config, gen, state, stats
    unreadable: tuple[str, ...] = ()

    @property
    def last_seen(self) -> float | None:
        raw = self.state.get("last_seen")
        try:
            return float(raw) if raw is not None else None
        except ValueError:
            return None


def now() -> float:
    """Wall-clock Unix time; the one clock backends and workers compare deadlines on
    (:mod:`fleet.core.clock`: a test can stop and move it)."""
    return clock.now()
