"""Browse: every task of a type findable by state, newest first, in pages; and the
dead letters a user selected, replayed or deleted by id.

The order is ``(enqueued_at, id)`` descending (``done``: ``(finished_at, id)``,
the newest finished first). ``enqueued_at`` is the time of the
task's first submit and never changes while the task moves (retries, sweeps,
replays keep it), so a page's last ``(enqueued_at, id)`` is a position that stays
meaningful while tasks move: the next page answers the tasks of the state strictly
before it. Within one walk of a quiet queue no task is listed twice and none is
missed. Under concurrent change a walk never repeats a task either (positions only
decrease), but a task that enters the state at a position the walk already passed
(a new submit, a retry, a replay) is not listed by it, and one that leaves the state
is simply absent from the pages after that; start a new walk to see them.
"""

from __future__ import annotations

import abc
import base64
import binascii
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from fleet.core.records import TaskBody, Tier, tier_of

#: The states a page lists (``pending`` is ``queued`` in :class:`TaskInfo` terms;
#: ``done`` lists finished records for as long as they are kept,
#: ``FLEET_RESULT_TTL_SECONDS`` and ``FLEET_RESULT_MAX_PER_TYPE``).
BrowseState = Literal["pending", "scheduled", "processing", "dead", "done"]
BROWSE_STATES: tuple[BrowseState, ...] = ("pending", "scheduled", "processing", "dead", "done")
#: Most index entries one page call reads when a filter (``run``) or the done state
#: skips some, as multiples of the page's size: past it the page is shorter than asked,
#: and its ``next`` goes on from where the reading stopped (a page stays O(page)).
SCAN_PAGES = 4
#: Bounds of a page's size.
MIN_LIMIT = 1
MAX_LIMIT = 500
#: Most ids one DLQ selection may name.
MAX_SELECTION = 1_000
#: Most queued entries :meth:`Browse.body` searches on a backend that keeps pending
#: bodies in lists without an index by id (Redis).
BODY_SCAN_LIMIT = 100_000


class BadCursor(ValueError):
    """A cursor that was not made by :func:`encode_cursor` (or was altered)."""


@dataclass(frozen=True, slots=True)
class Position:
    """A place in the newest-first order: the page after it starts strictly before.

    ``at`` is the task's submit time (its finish time in the ``done`` state)."""

    at: float
    task_id: str


def encode_cursor(pos: Position) -> str:
    """The opaque ``next_cursor`` text of a position (URL-safe, no padding)."""
    raw = json.dumps([pos.at, pos.task_id], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> Position:
    """The position a cursor names.

    Raises:
        BadCursor: ``cursor`` is not one :func:`encode_cursor` made.
    """
    if len(cursor) > 4096:
        raise BadCursor("cursor too long")
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("utf-8")
        value = json.loads(text)
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise BadCursor("not a cursor") from exc
    if (
        not isinstance(value, list)
        or len(value) != 2
        or isinstance(value[0], bool)
        or not isinstance(value[0], int | float)
        or not isinstance(value[1], str)
        or not math.isfinite(float(value[0]))
    ):
        raise BadCursor("not a cursor")
    return Position(float(value[0]), value[1])


def before(enqueued_at: float, task_id: str, pos: Position | None) -> bool:
    """True if ``(enqueued_at, task_id)`` comes after ``pos`` in newest-first order
    (strictly older, ties broken by id descending); always True without a position."""
    if pos is None:
        return True
    return (enqueued_at, task_id) < (pos.at, pos.task_id)


@dataclass(frozen=True, slots=True)
class TaskSummary:
    """One task of a page.

    Attributes:
        id: The task id.
        state: The state it was listed in.
        priority: Its priority; ``tier`` the tier it selects.
        group: Its flow-control group, if any.
        run: The run it belongs to, if any.
        attempt: Attempts charged so far.
        enqueued_at: When it was first submitted (Unix seconds).
        ready_at: When a scheduled task becomes pending (scheduled only, where known).
        deadline: A processing task's lease deadline (where known).
        last_error: The last failure's message (dead tasks, and retried ones where known).
        failed_at: When it last failed, where known.
        finished_at: When a done task finished.
    """

    id: str
    state: BrowseState
    priority: int
    group: str | None
    run: str | None
    attempt: int
    enqueued_at: float
    ready_at: float | None = None
    deadline: float | None = None
    last_error: str | None = None
    failed_at: float | None = None
    finished_at: float | None = None

    @classmethod
    def of_dead(cls, b: TaskBody) -> TaskSummary:
        """The page item of a dead letter, from its stored body (which keeps its
        group, run, attempts and last failure)."""
        return cls(
            id=b.id,
            state="dead",
            priority=b.priority,
            group=b.group,
            run=b.run,
            attempt=b.attempt,
            enqueued_at=b.enqueued_at,
            last_error=b.last_error,
            failed_at=b.failed_at,
        )

    @property
    def tier(self) -> Tier:
        return tier_of(self.priority)

    @property
    def position(self) -> Position:
        if self.state == "done":
            return Position(self.finished_at or 0.0, self.id)
        return Position(self.enqueued_at, self.id)


@dataclass(frozen=True, slots=True)
class TaskPage:
    """One page: ``items`` newest first; ``next_cursor`` None on the last page."""

    items: tuple[TaskSummary, ...]
    next_cursor: str | None


def page_of(found: Sequence[TaskSummary], limit: int, stopped: Position | None = None) -> TaskPage:
    """The page of ``found`` (newest first, at most ``limit + 1`` long: one more than
    the page tells whether another follows). ``stopped``: the reading ended there
    before the page was full (:data:`SCAN_PAGES`), so the next page goes on from it."""
    items = tuple(found[:limit])
    if len(found) > limit and items:
        return TaskPage(items, encode_cursor(items[-1].position))
    return TaskPage(items, None if stopped is None else encode_cursor(stopped))


@dataclass(frozen=True, slots=True)
class DeadSelection:
    """What a DLQ selection did, each id in the order first given.

    Attributes:
        done: Ids acted on (replayed, or deleted).
        skipped: Ids in the DLQ that a replay took out without queueing them (a live
            task of the id was pushed meanwhile and wins) or left in place (the
            stored body cannot be read). Always empty for a delete.
        unknown: Ids not in the DLQ.
    """

    done: tuple[str, ...]
    skipped: tuple[str, ...]
    unknown: tuple[str, ...]


def check_page_args(state: str, limit: int, run: str | None = None) -> None:
    """Raise ``ValueError`` for a state, limit or run a page does not take."""
    if state not in BROWSE_STATES:
        raise ValueError(f"state must be one of {', '.join(BROWSE_STATES)}")
    if not MIN_LIMIT <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be {MIN_LIMIT}..{MAX_LIMIT}")
    if run is not None and (not isinstance(run, str) or not run or len(run) > 200):
        raise ValueError("run must be a run id (1-200 characters)")


class Browse(abc.ABC):
    """Pages of a type's tasks by state, and DLQ selections (``backend.browse``)."""

    @abc.abstractmethod
    async def page(
        self,
        automation_type: str,
        state: BrowseState,
        limit: int,
        cursor: str | None,
        run: str | None = None,
    ) -> TaskPage:
        """The ``limit`` (1..500) newest tasks of ``state`` strictly before ``cursor``
        (the ``next_cursor`` of the page before; None: from the newest), ordered by
        ``(enqueued_at, id)`` descending, ``(finished_at, id)`` for ``done`` (see the
        module docstring for what a walk sees under concurrent change). With ``run``,
        only that run's tasks; a page may then hold fewer than ``limit`` with a
        ``next_cursor`` that goes on (:data:`SCAN_PAGES`). Dead letters whose stored
        body cannot be read are not listed (``dead_peek`` shows them).

        Raises:
            BadCursor: ``cursor`` is not a cursor.
            ValueError: ``state`` or ``limit`` out of range.
        """

    @abc.abstractmethod
    async def body(self, automation_type: str, task_id: str) -> TaskBody | None:
        """The stored body (its payload) of a task that is pending, scheduled,
        processing or dead, for the task page; None when none is kept (a finished
        task keeps none) or the stored body cannot be read. On Redis a pending body
        is searched in the type's lists, at most :data:`BODY_SCAN_LIMIT` entries."""

    @abc.abstractmethod
    async def dead_select(
        self, automation_type: str, task_ids: Sequence[str], *, replay: bool
    ) -> DeadSelection:
        """Replay (as :meth:`TaskQueues.dead_replay` does, with ``attempt=0``) or
        delete the dead letters of the given ids, in one atomic step; ids not in the
        DLQ are reported ``unknown``, duplicates count once. Deleting leaves the
        runs' counters as :meth:`TaskQueues.dead_clear` does."""
