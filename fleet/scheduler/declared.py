"""Schedules declared on automation classes (``Schedules = [Schedule(...)]``) are
written to the backend when a worker or master with the plugin starts.

A declaration is stored once (never duplicated: the schedule id is its key) and
rewritten only when it changed in the code (its fingerprint differs): a new cron, a
new payload. Its state (last run; and ``enabled`` set by an operator, until the
declaration itself changes) is kept; a changed timing moves the next run to the
new schedule's next tick.
"""

from __future__ import annotations

import logging
from typing import Any

from fleet.core.capabilities.schedules import ScheduleStore
from fleet.core.records import now
from fleet.core.schedule import Schedule, fingerprint, new_record, next_tick

log = logging.getLogger("fleet.scheduler")

_TIMING = ("cron", "every_seconds", "timezone")


def declared_schedules(cls: type[Any]) -> list[Schedule]:
    """The ``Schedules`` of an automation class (validated at ``@register``)."""
    found = getattr(cls, "Schedules", None) or []
    return [s for s in found if isinstance(s, Schedule)]


async def sync_declared(store: ScheduleStore, classes: dict[str, type[Any]]) -> list[str]:
    """Create or update the declared schedules of ``classes`` (type -> class);
    returns ``type/id`` of each one written."""
    written: list[str] = []
    for automation_type, cls in classes.items():
        for schedule in declared_schedules(cls):
            if await _sync_one(store, automation_type, schedule):
                written.append(f"{automation_type}/{schedule.id}")
    if written:
        log.info("schedules declared by plugins written: %s", ", ".join(written))
    return written


async def _sync_one(store: ScheduleStore, automation_type: str, schedule: Schedule) -> bool:
    definition = schedule.definition()
    mark = fingerprint(definition)
    t = now()
    for _ in range(3):
        try:
            current = await store.get(automation_type, schedule.id)
        except ValueError:
            current = None  # unreadable: the declaration replaces it
        if current is None:
            fresh = new_record(automation_type, schedule.id, definition, now=t, declared=mark)
            await store.put(fresh)
            return True
        if current.declared == mark:
            return False
        retimed = any(current.definition.get(k) != definition.get(k) for k in _TIMING)
        updated = current.evolve(
            definition=definition,
            declared=mark,
            next_run=next_tick(definition, t) if retimed else current.next_run,
            updated_at=t,
        )
        if await store.swap(current, updated):
            return True
    log.warning(
        "%s: schedule %r changed under us three times; not updated", automation_type, schedule.id
    )
    return False
