"""The run's span (``fleet.core.tracing``): one attempt traced as a child of its
task's submit, with the attempt's outcome. Only called with tracing on."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fleet.core import tracing
from fleet.core.tasks import Task
from fleet.worker.outcomes import Outcome
from fleet.worker.slots import Slot

#: Outcomes whose error marks the span failed.
_ERRORS = frozenset({"failed", "invalid"})


async def traced(
    slot: Slot, task: Task[Any], run: Callable[[Slot, Task[Any]], Awaitable[Outcome]]
) -> Outcome:
    """``run(slot, task)`` inside the ``fleet.run <type>`` span."""
    with tracing.run_span(
        task.automation_type, task.id, task.attempt, slot.ctx.worker_id, task.traceparent
    ) as span:
        outcome = await run(slot, task)
        tracing.end_run(span, outcome.kind, outcome.error if outcome.kind in _ERRORS else None)
        return outcome
