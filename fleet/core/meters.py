"""Meters: what the fleet spent — requests, bytes by proxy tier, solver calls,
browser-seconds, run-seconds, a plugin's own units, and their price — summed per run,
per type, per domain, per identity pool and by hour (docs/costs.md).

Pure data and rules shared by every backend:

- **A scope** is what a sum belongs to, one string: ``type:<type>``,
  ``run:<run id>``, ``domain:<type>:<host>``, ``pool:<identity pool>``, and the hour
  buckets of a type ``hour:<type>:<hour start>`` (kept :data:`HOUR_KEEP_SECONDS`).
- **A meter** is a name and a number that only grows: the built-in ones
  (:data:`BUILT_IN`), ``bytes:<tier>`` and ``requests:<tier>`` by proxy tier,
  ``solves:<solver>`` by solver, ``spend`` (the sum of the prices, one currency unit),
  and a plugin's own (``ctx.meter("api_credits", 3)``: :func:`check_meter_name`).
- Workers add to meters in batches (:class:`MeterBatch`), one backend step a flush: a
  batch's sums land whole or not at all.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from fleet.core.errors import ContractValueError

#: The meters Fleet keeps itself (a plugin's own names must differ).
BUILT_IN: Final = frozenset(
    {
        "attempts",  # task attempts that ran (retried ones count: they were spent)
        "run_seconds",  # seconds inside run_one
        "requests",  # HTTP requests of ctx.http() clients and browser contexts
        "bytes_received",
        "bytes_sent",
        "solves",  # solver calls (solves:<solver> by solver)
        "solve_failures",
        "browser_seconds",  # seconds a browser context was open
        "spend",  # the priced sum (one currency unit)
        "outputs",  # items emitted (ctx.emit): what monitors read (fleet/core/monitors.py)
        "outputs_valid",  # of them, those that validate against the Output model
    }
)
#: Meters split by a part after a colon: by proxy tier, by solver, by output field.
SPLIT: Final = frozenset({"bytes", "requests", "solves", "nulls"})
#: How long a type's hour buckets are kept (30 days, like its history's).
HOUR = 3600
HOUR_KEEP_SECONDS = 30 * 24 * HOUR
#: Most meters one scope keeps (a plugin that makes up names cannot grow it forever).
MAX_METERS_PER_SCOPE = 200

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,199}$")


def check_meter_name(name: object) -> str:
    """A plugin's meter name: 1-40 lower-case letters, digits and ``_``, starting with a
    letter, none of Fleet's own.

    Raises:
        ContractValueError: naming ``meter``.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ContractValueError(
            f"a meter name is 1-40 of a-z, 0-9 and '_', starting with a letter; got {name!r}",
            field="meter",
        )
    if name in BUILT_IN or name in SPLIT:
        raise ContractValueError(f"{name!r} is one of Fleet's own meters", field="meter")
    return name


def split_meter(meter: str, part: str) -> str:
    """``bytes:<tier>``, ``requests:<tier>``, ``solves:<solver>``."""
    assert meter in SPLIT
    if not _PART.match(part):
        part = re.sub(r"[^A-Za-z0-9_.\-]", "_", part)[:200] or "_"
    return f"{meter}:{part}"


def check_amount(value: object) -> float:
    """A meter's increment: a finite number >= 0 (meters only grow).

    Raises:
        ContractValueError: naming ``amount``.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ContractValueError("a meter's amount is a number", field="amount")
    amount = float(value)
    if not math.isfinite(amount) or amount < 0 or amount > 1e15:
        raise ContractValueError(
            f"a meter's amount is a finite number from 0 to 1e15; got {value!r}", field="amount"
        )
    return amount


# ---------------------------------------------------------------- scopes


def type_scope(automation_type: str) -> str:
    return f"type:{automation_type}"


def run_scope(run_id: str) -> str:
    return f"run:{run_id}"


def domain_scope(automation_type: str, domain: str) -> str:
    return f"domain:{automation_type}:{domain}"


def pool_scope(pool: str) -> str:
    return f"pool:{pool}"


def hour_start(at: float) -> int:
    return int(at // HOUR) * HOUR


def hour_scope(automation_type: str, at: float) -> str:
    """The hour bucket of a type holding ``at``."""
    return f"hour:{automation_type}:{hour_start(at)}"


def hour_of(scope: str) -> int | None:
    """The start of an hour scope (None: not one)."""
    if not scope.startswith("hour:"):
        return None
    tail = scope.rsplit(":", 1)[1]
    return int(tail) if tail.isdigit() else None


@dataclass(frozen=True, slots=True)
class DayHold:
    """A type held by its ``daily_budget``: nothing of it is dispatched until ``until``
    (the next UTC day) unless the budget is raised."""

    until: float
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {"until": self.until, "reason": self.reason}


@dataclass(slots=True)
class MeterBatch:
    """Sums to add, by scope then meter (what a worker flushes)."""

    sums: dict[str, dict[str, float]] = field(default_factory=dict)

    def add(self, scopes: Iterable[str], meter: str, amount: float) -> None:
        if amount <= 0:
            return
        for scope in scopes:
            row = self.sums.setdefault(scope, {})
            row[meter] = row.get(meter, 0.0) + amount

    def merge(self, other: MeterBatch) -> None:
        for scope, row in other.sums.items():
            mine = self.sums.setdefault(scope, {})
            for meter, amount in row.items():
                mine[meter] = mine.get(meter, 0.0) + amount

    def __bool__(self) -> bool:
        return bool(self.sums)


def added(stored: Mapping[str, float], row: Mapping[str, float]) -> dict[str, float]:
    """A scope's meters after ``row`` is added: sums by name; a new name past
    :data:`MAX_METERS_PER_SCOPE` is dropped (the known ones still grow)."""
    out = dict(stored)
    for meter, amount in sorted(row.items()):
        if meter not in out and len(out) >= MAX_METERS_PER_SCOPE:
            continue
        out[meter] = out.get(meter, 0.0) + amount
    return out
