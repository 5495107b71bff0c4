"""The task browser: pages of a type's tasks by state, and selected dead letters
replayed or deleted (``backend.browse``), as the REST API serves them."""

from __future__ import annotations

from collections.abc import Sequence

from fleet.backends.base import Backend
from fleet.core.capabilities.browse import BadCursor, BrowseState, TaskSummary
from fleet.core.errors import InvalidInput
from fleet.master.http.models import (
    DeadSelectionResult,
    TaskItem,
    TaskPageBody,
)
from fleet.master.services.catalog import require_entry
from fleet.master.services.secrets import mask_credentials


def _item(s: TaskSummary) -> TaskItem:
    return TaskItem(
        id=s.id,
        state=s.state,
        priority=s.priority,
        tier=s.tier,
        group=s.group,
        run=s.run,
        attempt=s.attempt,
        enqueued_at=s.enqueued_at,
        ready_at=s.ready_at,
        deadline=s.deadline,
        last_error=None if s.last_error is None else mask_credentials(s.last_error),
        failed_at=s.failed_at,
        finished_at=s.finished_at,
    )


async def task_page(
    backend: Backend,
    automation_type: str,
    state: BrowseState,
    limit: int,
    cursor: str | None,
    where: str = "after",
    run: str | None = None,
) -> TaskPageBody:
    """One page of the type's tasks in ``state``, newest first (``done``: newest
    finished first), after ``cursor`` (the previous page's ``next``; ``where`` the
    query parameter that gave it), only ``run``'s if given (a page may then be short
    with a ``next`` that goes on); 404 for an unknown type, 422 for a cursor that is
    not one."""
    await require_entry(backend, automation_type)
    try:
        page = await backend.browse.page(automation_type, state, limit, cursor, run=run)
    except BadCursor as exc:
        raise InvalidInput(
            [{"type": "value_error", "loc": ["query", where], "msg": str(exc), "input": cursor}]
        ) from exc
    following = page.next_cursor
    return TaskPageBody(items=[_item(s) for s in page.items], next=following, next_cursor=following)


async def dead_selection(
    backend: Backend, automation_type: str, ids: Sequence[str], *, replay: bool
) -> DeadSelectionResult:
    """Replay or delete the named dead letters in one atomic step; unknown ids reported."""
    await require_entry(backend, automation_type)
    picked = await backend.browse.dead_select(automation_type, ids, replay=replay)
    return DeadSelectionResult(
        action="replay" if replay else "delete",
        done=list(picked.done),
        skipped=list(picked.skipped),
        unknown=list(picked.unknown),
    )
