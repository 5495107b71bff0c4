"""Task records of the memory backend: progress and outputs beside a task's
state, and the retention of finished states (``FLEET_RESULT_TTL_SECONDS``,
``FLEET_RESULT_MAX_PER_TYPE``). Mixed into :class:`~fleet.backends.memory.queue.QueueState`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from fleet.core.records import TaskBody, TaskInfo
from fleet.core.results import RECORD_MAX_OUTPUTS


@dataclass(slots=True)
class Extras:
    """What a task reported beside its state (only tasks that reported any)."""

    progress: dict[str, Any] | None = None
    outputs: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=RECORD_MAX_OUTPUTS))
    total: int = 0


class TaskRecordKeeping:
    """The record half of a type's queue state."""

    tasks: dict[str, Any]
    dead: dict[str, TaskBody]
    finished: dict[str, Any]
    finished_order: deque[tuple[float, str]]
    records: dict[str, Extras]
    result_ttl: float
    result_max: int

    def _ended(self, tid: str, now: float) -> None:
        """A task finished or died: index it for retention and drop what is past
        the age or count bound (the oldest finished first)."""
        order = self.finished_order
        order.append((now, tid))
        horizon = now - self.result_ttl
        while order and (order[0][0] < horizon or len(order) > self.result_max):
            at, old_id = order.popleft()
            old = self.finished.get(old_id)
            if old is not None and old.at == at:
                del self.finished[old_id]
                old = None
            if old is None and old_id not in self.tasks:
                self.records.pop(old_id, None)

    # ------------------------------------------------------------ records
    def _extras(self, tid: str, now: float) -> Extras | None:
        """The extras of a task that has a state (live, dead or finished)."""
        extras = self.records.get(tid)
        if extras is None:
            if tid not in self.tasks and tid not in self.dead and tid not in self.finished:
                return None
            extras = self.records[tid] = Extras()
            if tid in self.dead:  # reported after it died: index it for retention
                self._ended(tid, now)
        return extras

    def record_output(self, tid: str, output: dict[str, Any], now: float) -> None:
        """Keep one emitted output in the task's record."""
        extras = self._extras(tid, now)
        if extras is not None:
            extras.outputs.append(output)
            extras.total += 1

    def record_progress(self, tid: str, progress: dict[str, Any], now: float) -> None:
        """Keep the task's latest progress report."""
        extras = self._extras(tid, now)
        if extras is not None:
            extras.progress = progress

    def task_state(self, tid: str, now: float) -> TaskInfo:
        info, started_at = self._bare_state(tid, now)
        extras = self.records.get(tid)
        if extras is None:
            return info.with_extras(started_at=started_at)
        return info.with_extras(
            started_at=started_at,
            progress=extras.progress,
            outputs=tuple(extras.outputs),
            outputs_total=extras.total,
        )

    def _bare_state(self, tid: str, now: float) -> tuple[TaskInfo, float | None]:
        """The task's state without its record, and its started time."""
        raise NotImplementedError
