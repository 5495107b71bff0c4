"""A type's schedules as the REST API serves them: pages, create, change, run, delete.

A schedule's answer is its stored record (``ScheduleRecord.to_dict()``) with
``declared`` as a flag; a stored record this Fleet cannot read is listed as
``{"id", "unreadable": true, "raw", "error"}`` and answers 409 where it would be
read, changed or run. A change (PATCH) is merged over the stored definition,
re-validated as a whole and written by compare-and-set against the firer moving
the same record.
"""

from __future__ import annotations

import json
from typing import Any

from fleet.backends.base import Backend
from fleet.core.capabilities.schedules import UnreadableSchedule
from fleet.core.errors import Conflict, InvalidInput, NotFound
from fleet.core.records import now
from fleet.core.schedule import (
    DEFINITION,
    ScheduleRecord,
    check_definition,
    check_schedule_id,
    new_record,
    next_tick,
)
from fleet.master.services.catalog import require_batch_entry, require_readable_entry
from fleet.master.services.entry_cache import EntryCache
from fleet.master.services.validation import ErrorList, non_finite_errors
from fleet.scheduler import run_now

#: Fields whose change moves the next run to the new timing's next tick.
TIMING = ("cron", "every_seconds", "timezone")
#: Attempts of a PATCH or a run against the firer moving the same record meanwhile.
SWAP_TRIES = 5
#: Most schedules one page lists, and the most bytes of schedules it holds (a
#: page stops early, after at least one, once its payloads pass the budget).
MAX_PAGE = 1000
PAGE_BYTES = 4 << 20


def answer(record: ScheduleRecord) -> dict[str, Any]:
    """A schedule as every answer shows it: its record, and whether it is declared."""
    out = record.to_dict()
    out["declared"] = record.declared is not None
    return out


def unreadable(item: UnreadableSchedule) -> dict[str, Any]:
    """A stored schedule that cannot be read, as a list shows it."""
    return {"id": item.id, "unreadable": True, "raw": item.raw, "error": item.error}


def merge(current: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """``given`` (a PATCH) over ``current``; a non-null cron clears every_seconds and
    the other way round, unless the PATCH gives both."""
    merged = {**current, **given}
    if given.get("cron") is not None and "every_seconds" not in given:
        merged["every_seconds"] = None
    if given.get("every_seconds") is not None and "cron" not in given:
        merged["cron"] = None
    return merged


class Schedules:
    """The schedule operations of one type, over a backend and the submit routes'
    catalog entries (a payload is checked as a task submit checks it).

    Args:
        backend: The connected backend.
        entries: Batch types' entries and payload checkers.
        automation_type: The type whose schedules these are.
    """

    def __init__(self, backend: Backend, entries: EntryCache, automation_type: str) -> None:
        self.backend = backend
        self.entries = entries
        self.type = automation_type

    async def payload_errors(self, payload: Any) -> ErrorList:
        """The payload's errors against the type's schema, as a task submit finds them."""
        loc = ("body", "payload")
        # Lone surrogates never get this far: the JSON guard refuses them at ingress.
        errors = non_finite_errors(payload, loc)
        if errors:
            return errors
        checker = await self.entries.checker(self.backend, self.type)
        return checker.errors(payload, loc)

    async def record(self, schedule_id: str) -> ScheduleRecord:
        """The stored schedule; 404 if absent, 409 if its record cannot be read."""
        try:
            record = await self.backend.schedules.get(self.type, schedule_id)
        except ValueError as exc:
            raise self._conflict(
                schedule_id, f"{exc}; it never fires: DELETE it, then create it again"
            ) from exc
        if record is None:
            raise self._unknown(schedule_id)
        return record

    def _unknown(self, schedule_id: str) -> NotFound:
        return NotFound(
            f"no schedule {schedule_id!r} in {self.type!r}",
            resource="schedule",
            key=schedule_id,
            automation_type=self.type,
        )

    def _conflict(self, schedule_id: str, message: str) -> Conflict:
        return Conflict(message, resource="schedule", key=schedule_id, automation_type=self.type)

    async def get(self, schedule_id: str) -> ScheduleRecord:
        """One schedule of a batch type (404/409 as :meth:`record`)."""
        await require_batch_entry(self.backend, self.type)
        return await self.record(schedule_id)

    async def page(self, after: str | None, limit: int) -> dict[str, Any]:
        """``{"schedules": [...], "next": cursor or null}``: ``limit`` schedules by id
        after ``after`` (at most ~``PAGE_BYTES`` of them), and a ``note`` for a type
        without a task queue (none can fire it).

        Raises:
            NotFound: 404 for an unknown type.
            RetryLater: 503 while its entry cannot be read.
        """
        entry = await require_readable_entry(self.backend, self.type)
        items = await self.backend.schedules.listing(self.type)
        page: list[dict[str, Any]] = []
        size = 0
        cursor = None
        for item in items:  # ordered by id
            if after is not None and item.id <= after:
                continue
            if len(page) == limit or (page and size > PAGE_BYTES):
                cursor = page[-1]["id"]
                break
            shown = unreadable(item) if isinstance(item, UnreadableSchedule) else answer(item)
            size += len(json.dumps(shown, default=str))
            page.append(shown)
        out: dict[str, Any] = {"schedules": page, "next": cursor}
        if not entry.get("queue"):
            continuous = "continuous" in str(entry.get("kind", "")).lower()
            what = "a continuous automation" if continuous else "an automation without a task queue"
            out["note"] = (
                f"{self.type} is {what}: it runs without tasks, so no schedule can fire it"
            )
        return out

    async def create(self, schedule_id: str, fields: dict[str, Any], cap: int) -> ScheduleRecord:
        """Validate a new schedule and store it; its first tick is the first after now.

        Raises:
            InvalidInput: The definition or the payload is refused (422).
            Conflict: 409 if the id exists, or the type has ``cap`` schedules.
        """
        await require_batch_entry(self.backend, self.type)
        check_schedule_id(schedule_id)
        definition = check_definition({k: v for k, v in fields.items() if k in DEFINITION})
        errors = await self.payload_errors(definition["payload"])
        if errors:
            raise InvalidInput(errors)
        if await self.backend.schedules.get_raw(self.type, schedule_id) is not None:
            raise self._conflict(
                schedule_id, f"schedule {schedule_id!r} exists already in {self.type!r}: PATCH it"
            )
        if len(await self.backend.schedules.listing_raw(self.type)) >= cap:
            raise self._conflict(
                schedule_id,
                f"{self.type!r} has {cap} schedules, the most FLEET_MAX_SCHEDULES "
                "allows: delete one first, or raise the setting",
            )
        record = new_record(self.type, schedule_id, definition, now=now())
        await self.backend.schedules.put(record)
        return record

    async def change(self, schedule_id: str, given: dict[str, Any]) -> ScheduleRecord:
        """Merge ``given`` over the stored definition, re-validate it and swap it in.

        ``{"enabled": false}`` pauses; resuming moves the next run to the first tick
        after now (no catch-up), and so does a new timing. Pausing always works; a
        resume or a new payload that no longer fits the type's ``TaskPayload`` is
        refused (its ticks would enqueue bad tasks).

        Raises:
            InvalidInput: The merged definition or its payload is refused (422).
            NotFound, Conflict: 404/409 as :meth:`record`; 409 when the record kept
                changing for ``SWAP_TRIES`` attempts.
        """
        await require_batch_entry(self.backend, self.type)
        for _attempt in range(SWAP_TRIES):
            current = await self.record(schedule_id)
            definition = check_definition(merge(current.definition, given))
            if "payload" in given or definition["enabled"]:
                errors = await self.payload_errors(definition["payload"])
                if errors:
                    raise InvalidInput(errors)
            t = now()
            retimed = any(current.definition.get(k) != definition.get(k) for k in TIMING)
            resumed = definition["enabled"] and not current.enabled
            updated = current.evolve(
                definition=definition,
                next_run=next_tick(definition, t) if retimed or resumed else current.next_run,
                updated_at=t,
            )
            if await self.backend.schedules.swap(current, updated):
                return updated
        raise self._conflict(
            schedule_id, f"schedule {schedule_id!r} kept changing meanwhile; try again"
        )

    async def run(self, schedule_id: str) -> str:
        """Enqueue one task with the schedule's payload now; the task's id.

        Raises:
            NotFound, Conflict: 404/409 as :meth:`record`; 409 when the payload no longer
                fits the type's ``TaskPayload``.
        """
        await require_batch_entry(self.backend, self.type)
        record = await self.record(schedule_id)
        errors = await self.payload_errors(record.definition["payload"])
        if errors:
            where = ".".join(str(p) for p in errors[0]["loc"][1:])
            raise self._conflict(
                schedule_id,
                f"the schedule's payload no longer fits the type's TaskPayload "
                f"({where}: {errors[0]['msg']}); PATCH its payload",
            )
        return await run_now(self.backend, record)

    async def delete(self, schedule_id: str) -> None:
        """Delete the schedule (an unreadable one too).

        Raises:
            NotFound: 404 if there is none of that id.
        """
        await require_batch_entry(self.backend, self.type)
        if not await self.backend.schedules.delete(self.type, schedule_id):
            raise self._unknown(schedule_id)
