"""Budgets: the caps a run (``budget``) or a type (``daily_budget``) may spend up to
before it pauses (docs/costs.md).

A budget is a map of meter name to cap. A name is any meter of the run's scope
(:mod:`fleet.core.meters`: ``spend``, ``requests``, ``bytes:residential``, a plugin's
own ``api_credits``...) or one of two sums: ``bytes`` (sent plus received) and
``solver_calls`` (``solves``). The rule (:func:`over`) is one pure function: the
SQLite engine calls it in the transaction that adds meters, and ``lua/meters.lua``
writes it again, held to it by a differential test.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from fleet.core.errors import ContractValueError
from fleet.core.meters import hour_scope

#: Budget names that sum meters.
SUMS: Final[dict[str, tuple[str, ...]]] = {
    "bytes": ("bytes_received", "bytes_sent"),
    "solver_calls": ("solves",),
}
#: Most caps one budget holds.
MAX_CAPS: Final = 20
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}(:[A-Za-z0-9][A-Za-z0-9_.\-]{0,199})?$")


def check_budget(value: Any, *, field: str = "budget") -> dict[str, float] | None:
    """A budget from outside: None, or 1-20 ``meter: cap`` pairs, each cap a finite
    number > 0; returned sorted by name.

    Raises:
        ContractValueError: naming ``field``.
    """
    if value is None:
        return None
    if not isinstance(value, Mapping) or not 1 <= len(value) <= MAX_CAPS:
        raise ContractValueError(
            f"{field} is an object of 1 to {MAX_CAPS} meter: cap pairs, such as "
            '{"spend": 50} or {"bytes": 5e9, "solver_calls": 1000}',
            field=field,
        )
    out: dict[str, float] = {}
    for name, cap in value.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise ContractValueError(
                f"{field}: {str(name)[:60]!r} is not a meter name (spend, bytes, "
                "solver_calls, requests, bytes:<tier>, a plugin's own...)",
                field=field,
            )
        if (
            isinstance(cap, bool)
            or not isinstance(cap, int | float)
            or not math.isfinite(cap)
            or not 0 < cap <= 1e18
        ):
            raise ContractValueError(
                f"{field}: the cap of {name!r} is a number above 0; got {cap!r}"[:200],
                field=field,
            )
        out[name] = float(cap)
    return dict(sorted(out.items()))


def used(meters: Mapping[str, float], name: str) -> float:
    """How much of budget name ``name`` the meters show."""
    parts = SUMS.get(name, (name,))
    return float(sum(float(meters.get(p, 0.0)) for p in parts))


def over(budget: Mapping[str, float] | None, meters: Mapping[str, float]) -> str | None:
    """Why meters this high stop a run or a type with ``budget`` (the first cap reached,
    by name), or None while every cap is above its meter."""
    if not budget:
        return None
    for name in sorted(budget):
        have, cap = used(meters, name), float(budget[name])
        if have >= cap:
            return f"budget reached: {name} {have:.6g} of {cap:.6g}"
    return None


DAY = 86_400


def day_hours(at: float) -> list[int]:
    """The hour starts of the UTC day holding ``at``, up to ``at``'s hour (the hour
    scopes a type's day sums: :func:`fleet.core.meters.hour_scope`)."""
    start = int(at // DAY) * DAY
    return list(range(start, int(at // 3600) * 3600 + 1, 3600))


def day_scopes(automation_type: str, at: float) -> list[str]:
    """The hour scopes of a type's UTC day holding ``at``, in order (what a daily budget
    sums)."""
    return [hour_scope(automation_type, h) for h in day_hours(at)]


def next_day(at: float) -> float:
    """When the UTC day after ``at``'s starts (a daily budget's pause ends)."""
    return float((int(at // DAY) + 1) * DAY)


def summed(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Meters of several scopes added up by name (a day from its hours), in order."""
    out: dict[str, float] = {}
    for row in rows:
        for meter, value in row.items():
            out[meter] = out.get(meter, 0.0) + float(value)
    return out


def left(budget: Mapping[str, float] | None, meters: Mapping[str, float]) -> dict[str, float]:
    """What is left of each cap (0 once reached)."""
    return {n: max(float(c) - used(meters, n), 0.0) for n, c in sorted((budget or {}).items())}


__all__ = [
    "DAY", "MAX_CAPS", "SUMS", "check_budget", "day_hours", "day_scopes", "left", "next_day",
    "over",
    "summed", "used",
]  # fmt: skip
