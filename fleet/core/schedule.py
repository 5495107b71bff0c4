"""Schedules: periodic tasks that fire exactly once per tick, fleet-wide.

:class:`Schedule` is what a plugin declares (``Schedules = [Schedule(...)]``) and what
the REST API stores; :class:`ScheduleRecord` is the stored form (the definition plus
its state: next run, last run). The rest are pure functions: when the next tick is
(``cronsim`` for cron expressions, with their time zone and daylight-saving rules),
what a firer does when a schedule is due (:func:`plan`, misfires included) and the
id of a tick's task (:func:`tick_task_id`), which goes through the idempotent submit so
a race between firers or a restart cannot enqueue a tick twice.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError
from pydantic import BaseModel

from fleet.core import clock
from fleet.core.errors import ContractValueError
from fleet.core.flow import check_group

Misfire = Literal["once", "skip"]
MISFIRES: tuple[Misfire, ...] = ("once", "skip")
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$")
_EVERY_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d)?\s*$")
_UNIT = {None: 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
#: The longest period and jitter accepted (a year).
MAX_SECONDS = 366 * 86400.0
#: Definition fields (what a declaration or a PATCH sets); the rest is state.
DEFINITION = (
    "cron", "every_seconds", "timezone", "payload", "priority", "group", "max_attempts",
    "enabled", "misfire", "jitter_seconds",
)  # fmt: skip


def parse_every(value: str | float | int) -> float:
    """Seconds of ``every``: a number of seconds, or ``"30s"``, ``"5m"``, ``"2h"``, ``"1d"``."""
    if isinstance(value, bool):
        raise ContractValueError("every must be a duration", field="every_seconds")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        m = _EVERY_RE.match(str(value))
        if m is None:
            raise ContractValueError(
                f"every {value!r} is not a duration such as 30s, 5m, 2h or 1d",
                field="every_seconds",
            )
        seconds = float(m.group(1)) * _UNIT[m.group(2)]
    if not (math.isfinite(seconds) and seconds >= 1):
        raise ContractValueError("every must be at least 1 second", field="every_seconds")
    if seconds > MAX_SECONDS:
        raise ContractValueError(
            f"every must be at most 366 days ({MAX_SECONDS:.0f} s)", field="every_seconds"
        )
    return seconds


def check_cron(expr: str) -> str:
    """A cron expression cronsim accepts (5 fields, or 6 with seconds first)."""
    if not isinstance(expr, str) or not expr.strip() or len(expr) > 200:
        raise ContractValueError("cron must be a cron expression", field="cron")
    try:
        CronSim(expr, datetime(2000, 1, 1, tzinfo=UTC))
    except (CronSimError, ValueError, IndexError) as exc:
        raise ContractValueError(f"cron {expr!r} is not valid: {exc}", field="cron") from exc
    return " ".join(expr.split())


def check_timezone(name: str) -> str:
    if not isinstance(name, str) or not name or len(name) > 100:
        raise ContractValueError("timezone must be an IANA time zone name", field="timezone")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ContractValueError(
            f"timezone {name!r} is not an IANA time zone (e.g. UTC, Europe/Berlin)",
            field="timezone",
        ) from exc
    return name


def check_schedule_id(value: Any) -> str:
    if not isinstance(value, str) or not _ID_RE.match(value):
        raise ContractValueError(
            "a schedule id is 1-100 characters of letters, digits, '.', '_', ':' or '-', "
            "starting with a letter or digit",
            field="id",
        )
    return value


@dataclass(frozen=True)
class Schedule:
    """A periodic task of a batch automation.

    Declare it on the class (``Schedules = [Schedule(id="hourly", cron="0 * * * *",
    timezone="Europe/Berlin", payload=ScrapeTask(url=...))]``) or create it over REST.
    Each tick enqueues one task, fleet-wide, whichever workers and masters are up.

    Args:
        id: Unique within the automation type.
        cron: A cron expression (5 fields; or 6 with seconds first), in ``timezone``.
        every: Or a fixed period: seconds, or ``"30s"``, ``"5m"``, ``"2h"``, ``"1d"``
            (at least 1 s); ticks are aligned to multiples of the period.
        timezone: IANA name for ``cron`` (default UTC); daylight-saving changes
            follow cron's usual rules (a skipped hour fires once, later; a repeated
            one once).
        payload: The task's payload: a ``TaskPayload`` instance (or its JSON dict).
        priority: ``>0`` high tier, ``0`` normal, ``<0`` low.
        group: The tasks' flow-control group.
        max_attempts: Per-task override of ``Config.max_attempts``.
        enabled: False: no tick fires until it is resumed.
        misfire: ``"once"`` (default): after an outage longer than a period, one
            catch-up run; ``"skip"``: none, the next tick on time.
        jitter_seconds: Fire each tick up to this much later (the same offset for
            the same tick on every process), to spread load.
    """

    id: str
    cron: str | None = None
    every: str | float | None = None
    timezone: str = "UTC"
    payload: Any = None
    priority: int = 0
    group: str | None = None
    max_attempts: int | None = None
    enabled: bool = True
    misfire: Misfire = "once"
    jitter_seconds: float = 0.0

    def definition(self) -> dict[str, Any]:
        """The stored definition (validated): what :func:`check_definition` accepts."""
        payload = self.payload
        if isinstance(payload, BaseModel):
            payload = payload.model_dump(mode="json")
        return check_definition(
            {
                "cron": self.cron,
                "every_seconds": None if self.every is None else parse_every(self.every),
                "timezone": self.timezone,
                "payload": payload,
                "priority": self.priority,
                "group": self.group,
                "max_attempts": self.max_attempts,
                "enabled": self.enabled,
                "misfire": self.misfire,
                "jitter_seconds": self.jitter_seconds,
            }
        )


def check_definition(d: dict[str, Any]) -> dict[str, Any]:
    """Validate a definition (every field of :data:`DEFINITION`), canonical form.

    Raises:
        ContractValueError: naming the field.
    """
    cron, every = d.get("cron"), d.get("every_seconds")
    if (cron is None) == (every is None):
        raise ContractValueError("give exactly one of cron and every_seconds", field="cron")
    out = dict(d)
    out["cron"] = None if cron is None else check_cron(cron)
    out["every_seconds"] = None if every is None else parse_every(every)
    out["timezone"] = check_timezone(d.get("timezone") or "UTC")
    prio = d.get("priority", 0)
    if isinstance(prio, bool) or not isinstance(prio, int) or abs(prio) > 1_000_000:
        raise ContractValueError("priority must be an integer", field="priority")
    if d.get("group") is not None:
        check_group(d["group"])
    m = d.get("max_attempts")
    if m is not None and (isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= 1000):
        raise ContractValueError("max_attempts must be an integer 1..1000", field="max_attempts")
    if not isinstance(d.get("enabled", True), bool):
        raise ContractValueError("enabled must be true or false", field="enabled")
    if d.get("misfire", "once") not in MISFIRES:
        raise ContractValueError("misfire must be 'once' or 'skip'", field="misfire")
    jitter = d.get("jitter_seconds", 0.0)
    if isinstance(jitter, bool) or not isinstance(jitter, int | float):
        raise ContractValueError("jitter_seconds must be a number", field="jitter_seconds")
    if not (math.isfinite(jitter) and jitter >= 0):
        raise ContractValueError("jitter_seconds must be >= 0", field="jitter_seconds")
    if jitter > MAX_SECONDS:
        raise ContractValueError(
            f"jitter_seconds must be at most 366 days ({MAX_SECONDS:.0f} s)",
            field="jitter_seconds",
        )
    out["jitter_seconds"] = float(jitter)
    out.setdefault("priority", 0)
    out.setdefault("enabled", True)
    out.setdefault("misfire", "once")
    out.setdefault("group", None)
    out.setdefault("max_attempts", None)
    return {k: out.get(k) for k in DEFINITION}


def fingerprint(definition: dict[str, Any]) -> str:
    """A short digest of a definition (a changed declaration is a new fingerprint)."""
    import json

    text = json.dumps(definition, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ScheduleRecord:
    """A stored schedule: its definition and its state.

    Attributes:
        declared: The fingerprint of the class declaration it came from (None for
            one created over REST); a changed declaration rewrites the definition.
        next_run: Unix time of the next tick (its scheduled time, jitter not added).
        last_run: The last tick that fired (its scheduled time), or None.
        last_task_id: The task that tick enqueued.
        last_error: Why the last tick enqueued nothing (its payload no longer fits the
            type's ``TaskPayload``), or None.
    """

    automation_type: str
    id: str
    definition: dict[str, Any]
    next_run: float
    last_run: float | None = None
    last_task_id: str | None = None
    last_error: str | None = None
    declared: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def enabled(self) -> bool:
        return bool(self.definition.get("enabled", True))

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            **self.definition,
            "next_run": self.next_run,
            "last_run": self.last_run,
            "last_task_id": self.last_task_id,
            "last_error": self.last_error,
            "declared": self.declared,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }

    @classmethod
    def from_dict(cls, automation_type: str, d: dict[str, Any]) -> ScheduleRecord:
        """Read a stored record (raises ``ValueError``/``KeyError``/``TypeError`` if it
        is not one: the store marks it unreadable)."""
        definition = check_definition({k: d.get(k) for k in DEFINITION})
        last = d.get("last_run")
        return cls(
            automation_type=automation_type,
            id=check_schedule_id(d["id"]),
            definition=definition,
            next_run=float(d["next_run"]),
            last_run=None if last is None else float(last),
            last_task_id=d.get("last_task_id"),
            last_error=d.get("last_error") if isinstance(d.get("last_error"), str) else None,
            declared=d.get("declared"),
            created_at=float(d.get("created_at") or 0.0),
            updated_at=float(d.get("updated_at") or 0.0),
        )

    def evolve(self, **changes: Any) -> ScheduleRecord:
        return replace(self, **changes)


def next_tick(definition: dict[str, Any], after: float) -> float:
    """The first tick strictly after ``after`` (Unix seconds)."""
    every = definition.get("every_seconds")
    if every:
        period = float(every)
        return float((math.floor(after / period) + 1) * period)
    tz = ZoneInfo(definition.get("timezone") or "UTC")
    start = datetime.fromtimestamp(math.floor(after), tz)
    for dt in CronSim(definition["cron"], start):
        ts = dt.timestamp()
        if ts > after:
            return ts
    raise ContractValueError("the cron expression never fires", field="cron")  # pragma: no cover


def previous_tick(definition: dict[str, Any], at: float) -> float:
    """The last tick at or before ``at`` (Unix seconds) of a cron schedule."""
    tz = ZoneInfo(definition.get("timezone") or "UTC")
    # CronSim walking back yields times strictly before its start.
    start = datetime.fromtimestamp(math.floor(at) + 1, tz)
    for dt in CronSim(definition["cron"], start, reverse=True):
        return dt.timestamp()
    raise ContractValueError("the cron expression never fires", field="cron")  # pragma: no cover


def jitter_of(schedule_id: str, tick: float, jitter_seconds: float) -> float:
    """The tick's delay: the same on every process, spread over ``[0, jitter)``."""
    if jitter_seconds <= 0:
        return 0.0
    digest = hashlib.sha256(f"{schedule_id}@{tick:.3f}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 * jitter_seconds


def tick_task_id(schedule_id: str, tick: float) -> str:
    """The id of a tick's task: one per schedule and tick, so a second enqueue of
    the same tick is a duplicate (it also serves as the idempotency key)."""
    return f"schedule:{schedule_id}:{tick:.0f}"


@dataclass(frozen=True, slots=True)
class Plan:
    """What a firer does with a due schedule: enqueue ``fire`` (a tick's scheduled
    time) unless None, then move ``next_run`` on; ``missed`` ticks were skipped."""

    fire: float | None
    next_run: float
    missed: int = 0


def plan(record: ScheduleRecord, now: float) -> Plan | None:
    """The firer's step for ``record`` at ``now``; None if it is not due (disabled, or
    its next tick, with its jitter, is still ahead).

    A tick is due at its scheduled time plus its jitter. A tick late by more than
    the period (the following tick has also passed: the fleet was down) is a
    misfire: ``once`` fires one catch-up run — the latest missed tick — and ``skip``
    fires none; either way ``next_run`` moves to the first tick after ``now``.
    """
    d = record.definition
    if not record.enabled:
        return None
    tick = record.next_run
    if now < tick + jitter_of(record.id, tick, d.get("jitter_seconds") or 0.0):
        return None
    following = next_tick(d, tick)
    if following > now:
        return Plan(fire=tick, next_run=following)
    # A misfire: walk to the latest tick not after now (bounded: a long outage of a
    # short period would be many ticks, so jump straight for fixed periods).
    every = d.get("every_seconds")
    if every:
        latest = float(math.floor(now / every) * every)
        missed = round((latest - tick) / every)
    else:
        # O(1) whatever the outage: the latest tick is found walking back from now,
        # and the count of missed ticks is estimated from the first period (exact
        # for regular crons; only logged).
        latest = max(previous_tick(d, now), following)
        period = following - tick
        missed = max(1, round((latest - tick) / period)) if period > 0 else 1
    upcoming = next_tick(d, now)
    if d.get("misfire") == "skip":
        return Plan(fire=None, next_run=upcoming, missed=missed + 1)
    return Plan(fire=latest, next_run=upcoming, missed=missed)


def new_record(
    automation_type: str,
    schedule_id: str,
    definition: dict[str, Any],
    *,
    now: float | None = None,
    declared: str | None = None,
) -> ScheduleRecord:
    """A fresh record: its first tick is the first one after ``now``."""
    t = clock.now() if now is None else now
    return ScheduleRecord(
        automation_type=automation_type,
        id=check_schedule_id(schedule_id),
        definition=check_definition(definition),
        next_run=next_tick(definition, t),
        declared=declared,
        created_at=t,
        updated_at=t,
    )
