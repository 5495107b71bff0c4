"""Schedules: stored per type, with a fleet-wide index of when each fires next.

Backends implement small primitives over the stored text of a schedule (its JSON
record) and its next due time; the typed methods here encode and decode
:class:`~fleet.core.schedule.ScheduleRecord` on top of them, so every backend reads
and writes records the same way, and a stored record that cannot be read affects
only itself (listed as unreadable, never fired, never breaking a listing).
"""

from __future__ import annotations

import abc
import json
import logging
from dataclasses import dataclass

from fleet.core.records import dumps
from fleet.core.schedule import ScheduleRecord

log = logging.getLogger("fleet.schedules")


@dataclass(frozen=True, slots=True)
class UnreadableSchedule:
    """A stored schedule that could not be read: its id, the stored text, and why."""

    automation_type: str
    id: str
    raw: str
    error: str


def encode_schedule(record: ScheduleRecord) -> str:
    """The stored text of a record."""
    return dumps(record.to_dict())


def decode_schedule(automation_type: str, raw: str) -> ScheduleRecord:
    """Read stored text (raises ``ValueError``, ``KeyError`` or ``TypeError``)."""
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError("a schedule record is a JSON object")
    return ScheduleRecord.from_dict(automation_type, data)


def due_at(record: ScheduleRecord) -> float | None:
    """Where the record sits in the due index: its next run, or nowhere if disabled."""
    return record.next_run if record.enabled else None


class ScheduleStore(abc.ABC):
    """Persistent schedules (``fleet:schedules:*`` on Redis, see redis-schema.md)."""

    # ------------------------------------------------------------ primitives
    @abc.abstractmethod
    async def put_raw(
        self, automation_type: str, schedule_id: str, raw: str, due: float | None
    ) -> None:
        """Store ``raw`` as the schedule's record and index it as due at ``due``
        (None: not indexed, it never fires). Atomic: record and index together."""

    @abc.abstractmethod
    async def swap_raw(
        self,
        automation_type: str,
        schedule_id: str,
        expected: str,
        raw: str,
        due: float | None,
    ) -> bool:
        """Like :meth:`put_raw`, but only if the stored record is exactly
        ``expected`` (compare and set); False, and no change, otherwise."""

    @abc.abstractmethod
    async def get_raw(self, automation_type: str, schedule_id: str) -> str | None:
        """The stored record, or None."""

    @abc.abstractmethod
    async def listing_raw(self, automation_type: str) -> dict[str, str]:
        """Every stored record of the type, by schedule id."""

    @abc.abstractmethod
    async def delete(self, automation_type: str, schedule_id: str) -> bool:
        """Delete a schedule and its index entry; True if it existed."""

    @abc.abstractmethod
    async def due_raw(self, now: float, limit: int = 100) -> list[tuple[str, str, str]]:
        """Up to ``limit`` indexed schedules of every type due at or before ``now``,
        earliest first, as ``(automation_type, schedule_id, raw)``."""

    @abc.abstractmethod
    async def next_due(self) -> float | None:
        """The earliest indexed due time of any schedule (None if none)."""

    # ------------------------------------------------------------ typed, shared
    async def put(self, record: ScheduleRecord) -> None:
        """Store a record (create or replace)."""
        await self.put_raw(
            record.automation_type, record.id, encode_schedule(record), due_at(record)
        )

    async def swap(self, old: ScheduleRecord, new: ScheduleRecord) -> bool:
        """Replace ``old`` by ``new`` only if the stored record is still ``old``."""
        return await self.swap_raw(
            new.automation_type, new.id, encode_schedule(old), encode_schedule(new), due_at(new)
        )

    async def get(self, automation_type: str, schedule_id: str) -> ScheduleRecord | None:
        """One schedule; None if absent.

        Raises:
            ValueError: The stored record cannot be read.
        """
        raw = await self.get_raw(automation_type, schedule_id)
        if raw is None:
            return None
        try:
            return decode_schedule(automation_type, raw)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"schedule {schedule_id!r} cannot be read: {exc}") from exc

    async def listing(self, automation_type: str) -> list[ScheduleRecord | UnreadableSchedule]:
        """Every schedule of the type by id; one that cannot be read comes back as
        :class:`UnreadableSchedule`."""
        out: list[ScheduleRecord | UnreadableSchedule] = []
        for sid, raw in sorted((await self.listing_raw(automation_type)).items()):
            try:
                out.append(decode_schedule(automation_type, raw))
            except (KeyError, TypeError, ValueError) as exc:
                out.append(UnreadableSchedule(automation_type, sid, raw, f"{exc}"))
        return out

    async def due(self, now: float, limit: int = 100) -> list[ScheduleRecord]:
        """Due schedules of every type; one that cannot be read is logged and taken
        out of the due index (its record stays, listed as unreadable)."""
        out: list[ScheduleRecord] = []
        for automation_type, sid, raw in await self.due_raw(now, limit):
            try:
                out.append(decode_schedule(automation_type, raw))
            except (KeyError, TypeError, ValueError) as exc:
                log.warning(
                    "%s: schedule %r cannot be read (%s): it will not fire until it is "
                    "replaced or deleted",
                    automation_type,
                    sid,
                    exc,
                )
                await self.swap_raw(automation_type, sid, raw, raw, None)
        return out
