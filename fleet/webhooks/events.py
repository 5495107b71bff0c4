"""The events webhooks deliver: each built from what its source publishes, with a
stable id (:func:`fleet.core.webhooks.event_id`) and the body that is signed and sent.

Sources: the ``runs`` topic and the runs themselves (``run.completed``,
``run.cancelled``, ``run.paused``), the ``tasks.dead`` topic (workers publish a task
they dead-lettered), the master's monitor checks (``monitor.firing``,
``monitor.resolved``), the ``identities`` topic (``identity.retired``) and the
``domains`` topic (``tier.changed``). Events without a time of their own (an identity
retired, a tier change) take the minute they were heard in as part of their id, so
that two masters hearing one message make one event.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fleet.core.webhooks import TEST_EVENT, event_id

#: The topic workers publish a dead-lettered task on: ``{type, task_id, token, attempt,
#: error, run, at}``.
DEAD_TOPIC = "tasks.dead"
#: The run events of the ``runs`` topic and the webhook event each is.
_RUN_STATES = {"done": "run.completed", "cancelled": "run.cancelled"}


@dataclass(frozen=True, slots=True)
class Event:
    """One event to deliver.

    Attributes:
        id: Its stable id (the ``webhook-id`` header).
        type: One of :data:`fleet.core.webhooks.EVENTS` (or ``webhook.test``).
        timestamp: When it happened (Unix seconds).
        data: What it says (the body's ``data``).
        types: The automation types it concerns (a subscription's ``types`` filter).
        run: The run it concerns (a subscription's ``runs`` filter), or None.
    """

    id: str
    type: str
    timestamp: float
    data: dict[str, Any]
    types: tuple[str, ...] = field(default=())
    run: str | None = None

    def body(self) -> bytes:
        """The request body: ``{"type", "timestamp" (ISO 8601, UTC), "data"}`` as compact
        JSON (the same bytes on every attempt)."""
        stamp = datetime.fromtimestamp(self.timestamp, UTC).isoformat().replace("+00:00", "Z")
        doc = {"type": self.type, "timestamp": stamp, "data": self.data}
        return json.dumps(doc, separators=(",", ":"), sort_keys=True, default=str).encode()

    def to_dict(self) -> dict[str, Any]:
        """The event as a delivery task carries it."""
        return {
            "id": self.id,
            "type": self.type,
            "timestamp": self.timestamp,
            "data": self.data,
            "types": list(self.types),
            "run": self.run,
        }


def _minute(at: float | None) -> int:
    return int((time.time() if at is None else at) // 60)


def run_event(record: dict[str, Any]) -> Event | None:
    """The event of a run record (a ``runs`` message or a run read back): ended
    ``done`` (``run.completed``), ``cancelled`` or ``paused``; None otherwise."""
    run_id, state = record.get("run_id"), record.get("state")
    if not isinstance(run_id, str) or not isinstance(state, str):
        return None
    by_type = record.get("by_type")
    types = tuple(sorted(by_type)) if isinstance(by_type, dict) else ()
    data = {
        "run_id": run_id,
        "name": record.get("name"),
        "state": state,
        "created_at": record.get("created_at"),
        "finished_at": record.get("finished_at"),
        "counters": record.get("counters"),
        "types": list(types),
    }
    if state == "paused":
        at = record.get("paused_at")
        if not isinstance(at, int | float):
            return None
        data["paused_reason"] = record.get("paused_reason")
        data["paused_at"] = at
        return Event(
            event_id("run.paused", run_id, repr(float(at))), "run.paused", at, data, types, run_id
        )
    kind = _RUN_STATES.get(state)
    at = record.get("finished_at")
    if kind is None or not isinstance(at, int | float):
        return None
    return Event(event_id(kind, run_id), kind, float(at), data, types, run_id)


def dead_event(message: dict[str, Any]) -> Event | None:
    """The ``task.dead`` event of a ``tasks.dead`` message; None if malformed."""
    t, task_id, token = message.get("type"), message.get("task_id"), message.get("token")
    if not all(isinstance(v, str) for v in (t, task_id, token)):
        return None
    at = message.get("at")
    run = message.get("run")
    data = {
        "type": t,
        "task_id": task_id,
        "attempt": message.get("attempt"),
        "error": message.get("error"),
        "run_id": run if isinstance(run, str) else None,
    }
    when = float(at) if isinstance(at, int | float) else time.time()
    return Event(
        event_id("task.dead", t, task_id, token),
        "task.dead",
        when,
        data,
        (str(t),),
        run if isinstance(run, str) else None,
    )


def monitor_event(run: dict[str, Any], state: dict[str, Any]) -> Event | None:
    """The ``monitor.firing``/``monitor.resolved`` event of a monitor's new state
    (:meth:`fleet.core.monitors.MonitorState.to_dict`) on a run (its record's dict)."""
    kind = {"firing": "monitor.firing", "resolved": "monitor.resolved"}.get(state.get("state", ""))
    run_id, since = run.get("run_id"), state.get("since")
    if kind is None or not isinstance(run_id, str) or not isinstance(since, int | float):
        return None
    by_type = run.get("by_type")
    types = tuple(sorted(by_type)) if isinstance(by_type, dict) else ()
    data = {"run_id": run_id, "name": run.get("name"), "types": list(types), **state}
    ident = event_id(kind, run_id, state.get("monitor"), repr(float(since)))
    return Event(ident, kind, float(since), data, types, run_id)


def identity_event(message: dict[str, Any], at: float | None = None) -> Event | None:
    """The ``identity.retired`` event of an ``identities`` message (other identity
    events are not webhook events); ``at``: when it was heard."""
    if message.get("event") != "retired":
        return None
    pool, ident = message.get("pool"), message.get("id")
    if not isinstance(pool, str) or not isinstance(ident, str):
        return None
    reason = message.get("reason")
    data = {"pool": pool, "id": ident, "reason": reason if isinstance(reason, str) else None}
    when = time.time() if at is None else at
    key = event_id("identity.retired", pool, ident, _minute(at))
    return Event(key, "identity.retired", when, data)


def tier_event(message: dict[str, Any], at: float | None = None) -> Event | None:
    """The ``tier.changed`` event of a ``domains`` message; ``at``: when it was heard."""
    t, domain = message.get("type"), message.get("domain")
    if not isinstance(t, str) or not isinstance(domain, str):
        return None
    data = {k: message.get(k) for k in ("type", "domain", "tier", "tier_index", "change", "kind")}
    when = time.time() if at is None else at
    key = event_id(
        "tier.changed", t, domain, message.get("tier_index"), message.get("change"), _minute(at)
    )
    return Event(key, "tier.changed", when, data, (t,))


def webhook_test_event(hook_id: str) -> Event:
    """A ``webhook.test`` event for one subscription (a new id each time)."""
    at = time.time()
    data = {"webhook": hook_id, "message": "a test delivery from Fleet"}
    return Event(event_id(TEST_EVENT, hook_id, repr(at)), TEST_EVENT, at, data)


def event_of(raw: dict[str, Any]) -> Event:
    """An event as a delivery task carries it (:meth:`Event.to_dict`).

    Raises:
        KeyError, TypeError, ValueError: It is not one.
    """
    data = raw["data"]
    if not isinstance(data, dict):
        raise TypeError("data is an object")
    run = raw.get("run")
    return Event(
        id=str(raw["id"]),
        type=str(raw["type"]),
        timestamp=float(raw["timestamp"]),
        data=data,
        types=tuple(str(t) for t in raw.get("types") or ()),
        run=None if run is None else str(run),
    )
