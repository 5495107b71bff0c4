"""Webhooks (docs/webhooks.md): the subscriptions, the events they hear, the delivery
log, and the one rule the log follows on every engine (:func:`merged`, :func:`dropped`).

A subscription (:class:`Hook`) names a URL, the events it wants and optionally the
types or runs it follows. Every event has a stable id (:func:`event_id`, made from
what identifies the event, never from when it was seen), so the same event seen twice
(a catch-up scan, two masters) is one delivery, and a receiver drops repeats by its
``webhook-id``. Each delivery is a task of the built-in type :data:`DELIVERY_TYPE`;
its progress is kept per subscription (:class:`Delivery`), the newest
:data:`LOG_KEEP` of them.

The SQLite engine applies :func:`merged` in Python; ``lua/webhooks.lua`` is its only
other copy (``tests/conformance/test_differential_webhooks.py`` holds them together).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import Any, Literal

#: The events a subscription may ask for.
EVENTS = (
    "run.completed",
    "run.paused",
    "run.cancelled",
    "task.dead",
    "monitor.firing",
    "monitor.resolved",
    "identity.retired",
    "tier.changed",
)
#: Sent by ``POST /webhooks/{id}/test`` only (no subscription asks for it).
TEST_EVENT = "webhook.test"
#: The built-in automation type whose tasks are the deliveries.
DELIVERY_TYPE = "fleet-webhooks"
#: Deliveries kept per subscription (the oldest go first).
LOG_KEEP = 100

Status = Literal["pending", "delivered", "failed", "dead"]
STATUSES: tuple[Status, ...] = ("pending", "delivered", "failed", "dead")
#: A delivery in one of these states changes no more (``delivered`` only from ``dead``).
FINAL: tuple[Status, ...] = ("delivered", "dead")


def event_id(event_type: str, *identity: object) -> str:
    """The stable id of an event: ``evt_`` and 32 hex digits of a hash of its type and
    what identifies it (a run's id, a monitor's name and since, ...)."""
    text = "\x1f".join([event_type, *(str(part) for part in identity)])
    return "evt_" + hashlib.sha256(text.encode()).hexdigest()[:32]


def clock(t: float) -> float:
    """A time as the log keeps it: milliseconds (both engines hold it exactly)."""
    return round(float(t), 3)


@dataclass(frozen=True, slots=True)
class Hook:
    """A subscription.

    Attributes:
        id: ``wh_`` and 16 hex digits.
        url: Where deliveries are POSTed (http or https), exactly as given.
        events: The events it receives (:data:`EVENTS`).
        secret: ``whsec_`` and the base64 of the signing key (shown once, at creation).
        created_at: Unix time of its creation.
        types: Only events of these automation types (None: every type).
        runs: Only events of these runs (None: every run).
        description: Free text.
        enabled: A disabled subscription receives nothing.
    """

    id: str
    url: str
    events: tuple[str, ...]
    secret: str
    created_at: float
    types: tuple[str, ...] | None = None
    runs: tuple[str, ...] | None = None
    description: str = ""
    enabled: bool = True

    def wants(self, event_type: str, types: tuple[str, ...], run_id: str | None) -> bool:
        """Whether an event of ``event_type`` about ``types`` (the automation types it
        concerns; empty: none) and ``run_id`` goes to this subscription."""
        if not self.enabled or event_type not in self.events:
            return False
        if self.types is not None and not set(types) & set(self.types):
            return False
        return self.runs is None or run_id in self.runs

    def to_dict(self) -> dict[str, Any]:
        """The stored JSON form (the secret included)."""
        return {
            "id": self.id,
            "url": self.url,
            "events": list(self.events),
            "secret": self.secret,
            "created_at": self.created_at,
            "types": None if self.types is None else list(self.types),
            "runs": None if self.runs is None else list(self.runs),
            "description": self.description,
            "enabled": self.enabled,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Hook:
        """A stored subscription (raises ``KeyError``/``TypeError`` if it is not one)."""
        types, runs = raw.get("types"), raw.get("runs")
        return cls(
            id=str(raw["id"]),
            url=str(raw["url"]),
            events=tuple(str(e) for e in raw["events"]),
            secret=str(raw["secret"]),
            created_at=float(raw["created_at"]),
            types=None if types is None else tuple(str(t) for t in types),
            runs=None if runs is None else tuple(str(r) for r in runs),
            description=str(raw.get("description") or ""),
            enabled=bool(raw.get("enabled", True)),
        )


@dataclass(frozen=True, slots=True)
class Delivery:
    """One event's delivery to one subscription, as the log keeps it.

    Attributes:
        event_id: The event's id (the ``webhook-id`` header).
        event_type: The event's type.
        status: ``pending`` (queued), ``delivered`` (a 2xx came back), ``failed`` (the
            last attempt failed, another will come) or ``dead`` (no attempt left).
        attempts: Attempts made so far.
        http_status: The last attempt's HTTP status (None: no answer).
        error: Why the last attempt failed (None: it did not).
        created_at: When the delivery was queued.
        updated_at: When it last changed.
    """

    event_id: str
    event_type: str
    status: Status
    attempts: int = 0
    http_status: int | None = None
    error: str | None = None
    created_at: float = 0.0
    updated_at: float = field(default=0.0)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (stored and answered)."""
        return {
            "event_id": self.event_id,
            "event_type": self.event_type,
            "status": self.status,
            "attempts": self.attempts,
            "http_status": self.http_status,
            "error": self.error,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Delivery:
        """A stored delivery (raises ``KeyError``/``ValueError`` if it is not one)."""
        status = next((s for s in STATUSES if s == raw["status"]), None)
        if status is None:
            raise ValueError(f"not a delivery status: {raw['status']!r}")
        code = raw.get("http_status")
        error = raw.get("error")
        return cls(
            event_id=str(raw["event_id"]),
            event_type=str(raw["event_type"]),
            status=status,
            attempts=int(raw.get("attempts") or 0),
            http_status=None if code is None else int(code),
            error=None if error is None else str(error),
            created_at=float(raw.get("created_at") or 0.0),
            updated_at=float(raw.get("updated_at") or 0.0),
        )


def merged(before: Delivery | None, update: Delivery) -> Delivery:
    """The log's entry once ``update`` is applied to ``before`` (the one rule).

    A new entry is ``update`` as it is. Otherwise the entry keeps its event type and
    creation time; attempts never go down; a final entry (``delivered``, ``dead``)
    changes no more but for its attempts, except that a ``dead`` one that is then
    delivered (a slow attempt answered after the last one gave up) is ``delivered``;
    a ``pending`` update (the event queued again) changes nothing else. Any other
    update replaces the status, HTTP status and error, and ``updated_at`` keeps the
    newest time.
    """
    if before is None:
        return update
    attempts = max(before.attempts, update.attempts)
    final = before.status in FINAL and not (
        before.status == "dead" and update.status == "delivered"
    )
    if final or update.status == "pending":
        return replace(before, attempts=attempts)
    return replace(
        before,
        status=update.status,
        attempts=attempts,
        http_status=update.http_status,
        error=update.error,
        updated_at=max(before.updated_at, update.updated_at),
    )


def dropped(entries: list[tuple[float, str]], keep: int = LOG_KEEP) -> list[str]:
    """The event ids a log of ``(created_at, event_id)`` drops: all but the ``keep``
    newest, ordered by creation time, then event id."""
    ordered = sorted(entries)
    return [event for _, event in ordered[: max(len(ordered) - keep, 0)]]
