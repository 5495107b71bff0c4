"""What a function task's submits talk to (:mod:`fleet.core.functions`): a
:class:`Target` is a backend or a master, built by :mod:`fleet.sending`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class Ended:
    """What a target knows of a task that ended (or has not yet: ``state``).

    Attributes:
        state: ``done``, ``dead``, ``cancelled``, ``unknown`` or a live state.
        last_error: The last failure's one line, if any.
        outputs: The record's outputs (``{id, ts, attempt, payload}``), oldest first.
    """

    state: str
    last_error: str | None = None
    outputs: tuple[dict[str, Any], ...] = ()


class Target(Protocol):
    """Where a function task's submits go and its records come from: a backend
    or a master (:mod:`fleet.sending` builds both)."""

    async def push(self, automation_type: str, payload: Any, options: dict[str, Any]) -> str:
        """Queue one task; its id."""
        ...

    async def ended(self, automation_type: str, task_id: str, wait: float) -> Ended:
        """The task's record once it ended, or as it is after ``wait`` seconds."""
        ...

    async def close(self) -> None:
        """Let go of connections."""
        ...
