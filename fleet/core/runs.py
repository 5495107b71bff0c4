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

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from fleet.core.errors import ContractValueError
from fleet.core.flow import check_plain

RunState = Literal["running", "done", "cancelled"]
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
MAX_RUN_NAME_LEN = 200
MAX_UNIQUE_KEY_LEN = 2000

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
    """True if a run in ``state`` with these counters ends at this step."""
    return (
        state == "running"
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


def check_on_complete(value: Any) -> dict[str, Any] | None:
    """A run's ``on_complete``: None or ``{"type": str, "payload": dict?}``.

    Raises:
        ContractValueError: naming ``on_complete``.
    """
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise ContractValueError(
            "on_complete must be {'type': <automation type>, 'payload': {...}}",
            field="on_complete",
        )
    check_plain(value["type"], field="on_complete.type", max_len=200)
    payload = value.get("payload", {})
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        raise ContractValueError("on_complete.payload must be an object", field="on_complete")
    return {"type": value["type"], "payload": payload}


def check_run_name(value: Any) -> str | None:
    """A run's optional name (at most 200 plain characters)."""
    if value is None:
        return None
    check_plain(value, field="name", max_len=MAX_RUN_NAME_LEN)
    return str(value)


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
    """

    id: str
    name: str | None
    on_complete: dict[str, Any] | None
    state: RunState
    created_at: float
    finished_at: float | None = None
    counters: dict[str, int] = field(default_factory=zero_counters)
    by_type: dict[str, dict[str, int]] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """What the ``on_complete`` task gets under ``payload["run"]``."""
        return {"run_id": self.id, "state": self.state, "counters": dict(self.counters)}

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.id,
            "name": self.name,
            "on_complete": self.on_complete,
            "state": self.state,
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
    """The id of a run's callback task: fixed, so it can be pushed only once."""
    return f"run-{run_id}-complete"
