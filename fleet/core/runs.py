"""Runs: the tasks of one job across types, their counters and the rule that ends them.

Pure data and pure functions, shared by the memory and SQLite backends (and the
reference the Redis scripts are checked against). A run's counters change with
the task operations that change them (an *event* of one task), in the same
atomic step:

=============  ====================================================  ===============
event          when                                                  counters
=============  ====================================================  ===============
``queued``     a task of the run is pushed (queued or scheduled)     submitted+1, pending+1
``duplicate``  a push refused by the run's ``unique_key`` set        duplicates+1
``started``    reserve delivers it                                   pending-1, running+1
``requeued``   a retry (nack), a release, a throttle, a sweep        running-1, pending+1
               that re-queues an expired lease
``done``       acked                                                 running-1, done+1
``dead``       dead-lettered (nack, or reserve past max_attempts)    <from>-1, dead+1
``cancelled``  cancelled (queued/scheduled, or acked while flagged)  <from>-1, cancelled+1
``expired``    dropped at reserve for its ``ttl_seconds``            pending-1, expired+1
``replayed``   moved from the DLQ back to its queue                  dead-1, pending+1
=============  ====================================================  ===============

``<from>`` is ``running`` or ``pending`` (``scheduled`` counts as pending). A
redelivery is one ``requeued`` and one ``started``: the task is never counted
twice in ``submitted``. Every counter is also kept per task type.

The run ends exactly once (:func:`ends_now`): the first time, while it is
``running``, that ``pending == 0 and running == 0`` after ``submitted > 0``.
A run that ended stays ended (a dead task replayed into it is counted but does
not reopen it); a cancelled run ends ``cancelled`` without its ``on_complete``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from fleet.core.contracts import check_name
from fleet.core.errors import ContractValueError
from fleet.core.flow import check_plain

RunState = Literal["running", "paused", "done", "cancelled"]
#: The states of a run that has not ended: a ``paused`` run's queued tasks wait
#: (not dispatched) until it is resumed; it still takes pushes.
OPEN_STATES: frozenset[str] = frozenset(("running", "paused"))
RunEvent = Literal[
    "queued", "duplicate", "started", "requeued", "done", "dead", "cancelled", "expired", "replayed"
]
#: Every counter of a run, in the order the API shows them.
COUNTERS: tuple[str, ...] = (
    "submitted",
    "pending",
    "running",
    "done",
    "dead",
    "cancelled",
    "expired",
    "duplicates",
)
#: How long a run is kept after it ended (``FLEET_RUN_TTL_SECONDS``).
DEFAULT_RUN_TTL = 7 * 86_400.0
#: How long a run that is still running is kept with nothing of it moving
#: (``FLEET_RUN_IDLE_TTL_SECONDS``): created and never started, or forgotten.
DEFAULT_RUN_IDLE_TTL = 86_400.0
#: The longest ``delay_seconds`` a task of a run may have, unless the run says
#: otherwise (``max_delay_seconds`` on create).
DEFAULT_MAX_DELAY = 86_400.0
#: The most a run's ``max_delay_seconds`` may be (a year, the longest task delay).
MAX_MAX_DELAY = 366 * 86_400.0
#: The largest ``on_complete`` (bytes of its JSON) a run keeps: a task payload's cap,
#: the default request body limit (``FLEET_MAX_BODY_BYTES``).
MAX_ON_COMPLETE_BYTES = 1 << 20
#: The most types a run may name in ``types``.
MAX_RUN_TYPES = 100
MAX_RUN_NAME_LEN = 200
MAX_UNIQUE_KEY_LEN = 2000
#: Task ids that start with this are the runs' callbacks (:func:`callback_task_id`):
#: only the step that ends a run pushes one, so no submit may take such an id.
CALLBACK_PREFIX = "run-"
#: What a run id looks like: a uuid4 in hex, as ``runs.create`` makes them.
_RUN_ID = re.compile(r"[0-9a-f]{32}")

_FIXED: dict[str, tuple[tuple[str, int], ...]] = {
    "queued": (("submitted", 1), ("pending", 1)),
    "duplicate": (("duplicates", 1),),
    "started": (("pending", -1), ("running", 1)),
    "requeued": (("running", -1), ("pending", 1)),
    "done": (("running", -1), ("done", 1)),
    "expired": (("pending", -1), ("expired", 1)),
    "replayed": (("dead", -1), ("pending", 1)),
}


def deltas(event: RunEvent, *, from_running: bool = False) -> tuple[tuple[str, int], ...]:
    """The counter changes of one event (see the module's table).

    Args:
        event: What happened to one task of the run.
        from_running: For ``dead`` and ``cancelled``: the task was running (else
            pending or scheduled). Ignored by the other events.
    """
    fixed = _FIXED.get(event)
    if fixed is not None:
        return fixed
    if event not in ("dead", "cancelled"):
        raise ValueError(f"unknown run event {event!r}")
    return (("running" if from_running else "pending", -1), (event, 1))


def apply(
    counters: Mapping[str, int], event: RunEvent, *, from_running: bool = False
) -> dict[str, int]:
    """``counters`` after one event (a new dict; missing counters count as 0)."""
    out = {name: int(counters.get(name, 0)) for name in COUNTERS}
    for name, delta in deltas(event, from_running=from_running):
        out[name] += delta
    return out


def ends_now(state: str, counters: Mapping[str, int]) -> bool:
    """True if a run in ``state`` with these counters ends at this step (a paused run
    with nothing left queued or running ends as a running one does)."""
    return (
        state in OPEN_STATES
        and counters.get("submitted", 0) > 0
        and counters.get("pending", 0) <= 0
        and counters.get("running", 0) <= 0
    )


def step(
    state: str, counters: Mapping[str, int], event: RunEvent, *, from_running: bool = False
) -> tuple[dict[str, int], bool]:
    """One event of a run in ``state``: its new counters, and whether it ends now
    (state ``running`` → ``done``)."""
    new = apply(counters, event, from_running=from_running)
    return new, ends_now(state, new)


def run_ttl() -> float:
    """Seconds a run is kept after it ended (``FLEET_RUN_TTL_SECONDS``, default 7 days)."""
    raw = os.environ.get("FLEET_RUN_TTL_SECONDS")
    try:
        value = float(raw) if raw else DEFAULT_RUN_TTL
    except ValueError:
        return DEFAULT_RUN_TTL
    return value if value > 0 else DEFAULT_RUN_TTL


def run_idle_ttl() -> float:
    """Seconds a running run is kept with nothing of it moving
    (``FLEET_RUN_IDLE_TTL_SECONDS``, default a day)."""
    raw = os.environ.get("FLEET_RUN_IDLE_TTL_SECONDS")
    try:
        value = float(raw) if raw else DEFAULT_RUN_IDLE_TTL
    except ValueError:
        return DEFAULT_RUN_IDLE_TTL
    return value if value > 0 else DEFAULT_RUN_IDLE_TTL


def idle_until(t: float, delay: float = 0.0) -> float:
    """When a running run that moved at ``t`` expires if nothing else of it moves: a
    task scheduled ``delay`` seconds ahead counts as moving when it is due."""
    return t + max(delay, 0.0) + run_idle_ttl()


def is_run_id(value: object) -> bool:
    """True if ``value`` looks like a run id (32 lowercase hex digits)."""
    return isinstance(value, str) and _RUN_ID.fullmatch(value) is not None


def check_run_id(value: Any, *, field: str = "run") -> str:
    """A run id from outside (a submit's ``run``, a path): 32 lowercase hex digits.

    Raises:
        ContractValueError: naming ``field``.
    """
    if not is_run_id(value):
        shown = repr(value[:64]) if isinstance(value, str) else type(value).__name__
        raise ContractValueError(
            f"{field} must be a run id (32 lowercase hex digits, as POST /runs answers), "
            f"not {shown}",
            field=field,
        )
    return str(value)


class OnCompleteTooLarge(ContractValueError):
    """An ``on_complete`` larger than its cap (REST answers 413, as for a task payload)."""


def check_on_complete(
    value: Any, *, max_bytes: int = MAX_ON_COMPLETE_BYTES
) -> dict[str, Any] | None:
    """A run's ``on_complete``: None or ``{"type": <type name>, "payload": dict?}``,
    its JSON at most ``max_bytes``.

    Raises:
        OnCompleteTooLarge: its JSON is larger than ``max_bytes``.
        ContractValueError: naming ``on_complete`` or ``on_complete.type``.
    """
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise ContractValueError(
            "on_complete must be {'type': <automation type>, 'payload': {...}}",
            field="on_complete",
        )
    try:
        check_name(value["type"], "on_complete.type")
    except ContractValueError as exc:
        raise ContractValueError(exc.message, field="on_complete.type") from None
    payload = value.get("payload", {})
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        raise ContractValueError("on_complete.payload must be an object", field="on_complete")
    checked = {"type": value["type"], "payload": payload}
    try:
        size = len(json.dumps(checked, separators=(",", ":")).encode("utf-8", "surrogatepass"))
    except (TypeError, ValueError):
        raise ContractValueError(
            "on_complete.payload must be plain JSON", field="on_complete.payload"
        ) from None
    if size > max_bytes:
        raise OnCompleteTooLarge(
            f"on_complete is {size} bytes of JSON, larger than the {max_bytes} a task "
            "payload may have",
            field="on_complete.payload",
        )
    return checked


def check_run_types(value: Any) -> tuple[str, ...] | None:
    """A run's ``types``: None (not named), or the automation types that may join it
    through a scoped token (valid type names, at most :data:`MAX_RUN_TYPES`; sorted,
    each once).

    Raises:
        ContractValueError: naming ``types``.
    """
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise ContractValueError("types must be a list of automation types", field="types")
    if not value or len(value) > MAX_RUN_TYPES:
        raise ContractValueError(
            f"types must name 1 to {MAX_RUN_TYPES} automation types", field="types"
        )
    for name in value:
        try:
            check_name(name, "types: the automation type")
        except ContractValueError as exc:
            raise ContractValueError(exc.message, field="types") from None
    return tuple(sorted(set(value)))


def check_max_delay(value: Any) -> float:
    """A run's ``max_delay_seconds``: None (the default, a day), or seconds in
    ``[0, MAX_MAX_DELAY]``.

    Raises:
        ContractValueError: naming ``max_delay_seconds``.
    """
    if value is None:
        return DEFAULT_MAX_DELAY
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value <= MAX_MAX_DELAY  # also NaN
    ):
        raise ContractValueError(
            f"max_delay_seconds must be a number of seconds from 0 to {MAX_MAX_DELAY:.0f}",
            field="max_delay_seconds",
        )
    return float(value)


def check_run(
    on_complete: dict[str, Any] | None, types: tuple[str, ...] | None, max_delay: float
) -> tuple[dict[str, Any] | None, tuple[str, ...] | None, float]:
    """What ``runs.create`` of every backend stores, checked: no run holds an
    ``on_complete`` whose type is not a type name (a callback is pushed into the
    queue of that name).

    Raises:
        ContractValueError: naming the bad argument.
    """
    checked_types = check_run_types(None if types is None else list(types))
    return check_on_complete(on_complete), checked_types, check_max_delay(max_delay)


def delay_refusal(delay: float, max_delay: float) -> str | None:
    """Why a task of a run with ``max_delay`` may not be delayed ``delay`` seconds
    (None if it may)."""
    if delay <= max_delay:
        return None
    return (
        f"delay_seconds {delay:g} is past the run's max_delay_seconds ({max_delay:g}): "
        "a task of a run may not be delayed longer"
    )


def check_run_name(value: Any) -> str | None:
    """A run's optional name (at most 200 plain characters)."""
    if value is None:
        return None
    check_plain(value, field="name", max_len=MAX_RUN_NAME_LEN)
    return str(value)


#: The longest reason a pause keeps.
MAX_REASON_LEN = 500


def check_reason(value: Any) -> str:
    """Why a run is paused (1-500 plain characters).

    Raises:
        ContractValueError: naming ``reason``.
    """
    if not isinstance(value, str) or not value.strip():
        raise ContractValueError("reason must be a non-empty string", field="reason")
    check_plain(value, field="reason", max_len=MAX_REASON_LEN)
    return value


def check_unique_key(value: Any) -> str | None:
    """A submit's ``unique_key`` (at most 2000 characters, a URL fits)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_UNIQUE_KEY_LEN:
        raise ContractValueError(
            f"unique_key must be a non-empty string of at most {MAX_UNIQUE_KEY_LEN} characters",
            field="unique_key",
        )
    return value


def zero_counters() -> dict[str, int]:
    return dict.fromkeys(COUNTERS, 0)


@dataclass(frozen=True, slots=True)
class RunRecord:
    """What a backend knows of one run.

    Attributes:
        id: The run id (uuid hex).
        name: Its optional name.
        on_complete: ``{"type", "payload"}`` submitted once when it ends ``done``.
        state: ``running``, ``done`` or ``cancelled``.
        created_at: Unix time of ``runs.create``.
        finished_at: Unix time it ended (None while running).
        counters: :data:`COUNTERS` of all its tasks.
        by_type: The same counters per task type.
        types: The types a scoped token may submit into it (None: none named).
        max_delay_seconds: The longest delay a task of it may have.
        budget: Its caps by meter (:mod:`fleet.core.budgets`; None: none).
        paused_reason: Why it is paused (``state == "paused"``), else None.
        paused_at: When it paused (None unless paused).
    """

    id: str
    name: str | None
    on_complete: dict[str, Any] | None
    state: RunState
    created_at: float
    finished_at: float | None = None
    counters: dict[str, int] = field(default_factory=zero_counters)
    by_type: dict[str, dict[str, int]] = field(default_factory=dict)
    types: tuple[str, ...] | None = None
    max_delay_seconds: float = DEFAULT_MAX_DELAY
    budget: dict[str, float] | None = None
    paused_reason: str | None = None
    paused_at: float | None = None

    def summary(self) -> dict[str, Any]:
        """What the ``on_complete`` task gets under ``payload["run"]``."""
        return {"run_id": self.id, "state": self.state, "counters": dict(self.counters)}

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.id,
            "name": self.name,
            "on_complete": self.on_complete,
            "types": None if self.types is None else list(self.types),
            "max_delay_seconds": self.max_delay_seconds,
            "budget": self.budget,
            "state": self.state,
            "paused_reason": self.paused_reason,
            "paused_at": self.paused_at,
            "created_at": self.created_at,
            "finished_at": self.finished_at,
            "counters": {name: self.counters.get(name, 0) for name in COUNTERS},
            "by_type": {
                t: {name: c.get(name, 0) for name in COUNTERS}
                for t, c in sorted(self.by_type.items())
            },
        }


@dataclass(frozen=True, slots=True)
class RunPage:
    """One page of :meth:`Runs.page`, newest first; ``next`` is the cursor of the
    next page (None on the last)."""

    runs: list[RunRecord]
    next: str | None


@dataclass(frozen=True, slots=True)
class RunCancel:
    """What :meth:`Runs.cancel` did: the run as it is now, and the processing
    tasks it flagged as ``(type, task_id)`` (their slots are told to stop)."""

    record: RunRecord
    stopping: tuple[tuple[str, str], ...] = ()


def callback_payload(on_complete: Mapping[str, Any], record: RunRecord) -> dict[str, Any]:
    """The payload of a run's callback task: its ``on_complete`` payload plus
    ``{"run": {run_id, state, counters}}``."""
    payload = dict(on_complete.get("payload") or {})
    payload["run"] = record.summary()
    return payload


def callback_task_id(run_id: str) -> str:
    """The id of a run's callback task: fixed, so it can be pushed only once (and in
    the space :data:`CALLBACK_PREFIX` that no submit may use)."""
    return f"{CALLBACK_PREFIX}{run_id}-complete"
