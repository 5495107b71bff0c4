"""Does a schedule's payload still fit its type's ``TaskPayload``?

A plugin's new version may change its payload model after schedules were made; the
firer asks before each tick (``ScheduleFirer(check=...)``) so that a payload the type
no longer accepts is not enqueued tick after tick only to be dead-lettered. The
master checks against the catalog's schema (``fleet.master.services.schedule_check``); a worker
checks the types it runs against their classes, here.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from fleet.core.automation import BatchAutomation, get_automation

#: The longest error text a schedule carries.
MAX_ERROR_LEN = 500


def first_errors(errors: list[tuple[str, str]]) -> str:
    """``field: message; ...`` of a payload's errors, cut to :data:`MAX_ERROR_LEN`."""
    text = "; ".join(f"{where or 'payload'}: {msg}" for where, msg in errors)
    return text if len(text) <= MAX_ERROR_LEN else text[: MAX_ERROR_LEN - 1] + "…"


async def local_check(automation_type: str, payload: Any) -> str | None:
    """Check ``payload`` against the ``TaskPayload`` of a type registered in this
    process; None if it fits, or if this process does not run the type."""
    cls = get_automation(automation_type)
    if cls is None or not issubclass(cls, BatchAutomation):
        return None
    try:
        cls.TaskPayload.model_validate(payload)
    except ValidationError as exc:
        return first_errors([(".".join(str(p) for p in e["loc"]), e["msg"]) for e in exc.errors()])
    return None
