"""A type's ``daily_budget`` on SQLite (docs/costs.md): checked in the transaction that
adds the type's meters (the day's hour scopes summed, the budget read from the type's
stored config: one source), and a type past it held in ``type_pauses`` until the next
UTC day; :func:`held_until` is what a reserve reads."""

from __future__ import annotations

import sqlite3

from fleet.backends.sqlite.configs import stored
from fleet.backends.sqlite.events import publish
from fleet.core.budgets import day_scopes, next_day, over, summed


def daily_budget(conn: sqlite3.Connection, automation_type: str) -> dict[str, float] | None:
    """The type's ``daily_budget`` as its type-wide config stores it (None: none)."""
    value = stored(conn, automation_type).get("daily_budget")
    if not isinstance(value, dict) or not value:
        return None
    return {str(k): float(v) for k, v in value.items() if isinstance(v, int | float)}


def day_meters(conn: sqlite3.Connection, automation_type: str, at: float) -> dict[str, float]:
    """The type's meters over the UTC day of ``at`` (its hour scopes, read in one query,
    summed hour by hour as ``lua/meters.lua`` sums them)."""
    scopes = day_scopes(automation_type, at)
    by_scope: dict[str, dict[str, float]] = {}
    marks = ", ".join("?" * len(scopes))
    for scope, meter, value in conn.execute(
        f"SELECT scope, meter, value FROM meters WHERE scope IN ({marks})", scopes
    ):
        by_scope.setdefault(str(scope), {})[str(meter)] = float(value)
    return summed([by_scope.get(s, {}) for s in scopes])


def check(conn: sqlite3.Connection, automation_type: str, at: float) -> None:
    """The type's meters of the day grew: past its daily budget, it is held until the
    next UTC day (and the ``budgets`` event says so)."""
    budget = daily_budget(conn, automation_type)
    if budget is None:
        return
    reason = over(budget, day_meters(conn, automation_type, at))
    if reason is None:
        return
    until = next_day(at)
    held = conn.execute(
        "SELECT until FROM type_pauses WHERE type = ?", (automation_type,)
    ).fetchone()
    if held is not None and held[0] >= until:
        return
    conn.execute(
        "INSERT INTO type_pauses (type, until, reason) VALUES (?, ?, ?) ON CONFLICT (type) "
        "DO UPDATE SET until = excluded.until, reason = excluded.reason",
        (automation_type, until, "daily " + reason),
    )
    publish(
        conn,
        "budgets",
        {"event": "paused", "type": automation_type, "until": until, "reason": "daily " + reason},
        at,
    )


def held_until(conn: sqlite3.Connection, automation_type: str, at: float) -> float | None:
    """Until when the type is held by its daily budget (None: it is not, at ``at``)."""
    row = conn.execute(
        "SELECT until FROM type_pauses WHERE type = ?", (automation_type,)
    ).fetchone()
    return None if row is None or row[0] <= at else float(row[0])


def release(conn: sqlite3.Connection, automation_type: str) -> bool:
    """The hold ends (the budget was raised or removed); True if there was one."""
    return bool(conn.execute("DELETE FROM type_pauses WHERE type = ?", (automation_type,)).rowcount)
