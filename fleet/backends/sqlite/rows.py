"""What a row of the ``tasks`` table is: its ``tier`` column, its body with the
``attempt`` columns applied, and whether a task of an id is live."""

from __future__ import annotations

import json
import sqlite3

from fleet.core.records import TIERS, TaskBody

_TIER_NUM = {name: i for i, name in enumerate(TIERS)}


def tier_num(body: TaskBody) -> int:
    """The ``tasks.tier`` value of a body: 0 high, 1 normal, 2 low."""
    return _TIER_NUM[body.tier]


def merged(raw: str, attempt: int, max_attempts: int | None) -> TaskBody:
    """The task body of a row: its JSON with the ``attempt`` columns applied."""
    d = json.loads(raw)
    d["attempt"] = attempt
    d["max_attempts"] = max_attempts
    return TaskBody.from_dict(d)


def is_live(conn: sqlite3.Connection, automation_type: str, task_id: str) -> bool:
    """A task of this id is queued, scheduled or processing in the type."""
    row = conn.execute(
        "SELECT 1 FROM tasks WHERE type = ? AND id = ? "
        "AND state IN ('queued', 'scheduled', 'processing', 'parked')",
        (automation_type, task_id),
    ).fetchone()
    return row is not None
