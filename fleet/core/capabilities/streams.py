"""Output streams: one bounded, time-ordered stream of emits per automation type."""

from __future__ import annotations

import abc
from typing import Any

from fleet.core.records import StreamEntry

#: Default bounds of an output stream (spec: 50,000 entries, 3,600 s).
STREAM_MAX_LEN = 50_000
STREAM_MAX_AGE = 3600.0


class Streams(abc.ABC):
    """Per-type output streams (``stream:<type>``)."""

    @abc.abstractmethod
    async def push(
        self,
        automation_type: str,
        payload: Any,
        *,
        worker_id: str,
        max_len: int = STREAM_MAX_LEN,
        max_age: float = STREAM_MAX_AGE,
        task_id: str | None = None,
        attempt: int | None = None,
    ) -> StreamEntry:
        """Append an entry (new :func:`stream_entry_id`, ts = now, and the emitting
        task's ``task_id`` and ``attempt``, None outside a task), then trim the
        stream to entries younger than ``max_age`` and to the newest ``max_len``.
        Also publishes the entry on the event topic ``<type>.emit``. With a
        ``task_id``, the same atomic step keeps the entry (id, ts, attempt,
        payload) in that task's record (the newest
        :data:`~fleet.core.results.RECORD_MAX_OUTPUTS`)."""

    @abc.abstractmethod
    async def progress(
        self,
        automation_type: str,
        task_id: str,
        *,
        attempt: int,
        fraction: float | None,
        message: str | None,
    ) -> None:
        """Keep a task's latest progress report in its record (see
        :func:`fleet.core.results.progress_record`) and publish it on the event
        topic ``<type>.progress`` as ``{task_id, attempt, fraction, message, at}``.
        Validated by the caller (:func:`fleet.core.results.check_progress`)."""

    @abc.abstractmethod
    async def pop(self, automation_type: str, n: int = 1) -> list[StreamEntry]:
        """Remove and return the ``n`` oldest entries. Each entry goes to exactly
        one of any number of concurrent poppers."""

    @abc.abstractmethod
    async def peek(self, automation_type: str, n: int = 10) -> list[StreamEntry]:
        """The ``n`` oldest entries, oldest first, not removed."""

    @abc.abstractmethod
    async def read(
        self, automation_type: str, *, after: str | None = None, n: int = 100
    ) -> list[StreamEntry]:
        """Up to ``n`` entries with id > ``after`` (all if None), oldest first, not
        removed. Pass the last entry's id as the next ``after``."""

    @abc.abstractmethod
    async def tail(self, automation_type: str, n: int = 20) -> list[StreamEntry]:
        """The ``n`` newest entries, oldest first, not removed (for live views)."""

    @abc.abstractmethod
    async def length(self, automation_type: str) -> int:
        """Number of entries (expired ones may count until the next push trims)."""
