"""``Task``: what ``run_one`` receives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel

P = TypeVar("P", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class Task(Generic[P]):
    """One delivery of a task to a slot.

    Attributes:
        id: The task id (uuid hex unless the submitter chose one).
        payload: The validated ``TaskPayload`` instance.
        automation_type: The receiving automation's type.
        attempt: This delivery's attempt number, starting at 1.
        max_attempts: Attempts allowed before the task is dead-lettered.
        priority: ``>0`` high tier, ``0`` normal, ``<0`` low.
        enqueued_at: Unix time the task was first submitted.
        group: Its flow-control group (``submit(..., group=...)``), or None.
        timeout_seconds: The time limit of this run (the task's own
            ``timeout_seconds``, else the config's), or None: no limit.
        traceparent: The W3C ``traceparent`` its submit stored (the run is traced
            as its child with the ``[otel]`` extra), or None.
        run: The run it belongs to (``ctx.run_id``; its submits join it), or None.
    """

    id: str
    payload: P
    automation_type: str
    attempt: int = 1
    max_attempts: int = 3
    priority: int = 0
    enqueued_at: float = 0.0
    group: str | None = None
    timeout_seconds: float | None = None
    traceparent: str | None = None
    run: str | None = None

    @property
    def is_last_attempt(self) -> bool:
        """True when a failure of this attempt sends the task to the DLQ."""
        return self.attempt >= self.max_attempts
