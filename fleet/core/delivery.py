"""The delivery rules of a task queue, as pure functions.

Memory decides with them in Python and SQLite inside its transactions; the Lua
scripts of the Redis backend (``push.lua``, ``reserve.lua``, ``nack.lua``,
``sweep.lua``) are their one other copy, held to them by
``tests/conformance/test_differential.py``, which runs the same random sequences
through the three backends and compares every answer.
"""

from __future__ import annotations

from typing import Literal

from fleet.core.records import NackOutcome, TaskBody, refund_cap

#: What a reserve does with a task it popped: drop it (a cancel came first, or
#: its ttl ran out), dead-letter it (its attempts were spent by lost workers), or
#: lease it.
TakeVerdict = Literal["cancelled", "expired", "exhausted", "deliver"]


def duplicate_of(task_id: str, *, key_holder: str | None, live: bool) -> str | None:
    """Whom a push answers as a duplicate of, before its run (if any) is asked.

    Args:
        task_id: The pushed task's id.
        key_holder: The task its idempotency key still names (None: no key, or
            the key expired).
        live: A task of this id is queued, scheduled or processing in the type.

    Returns:
        The id to answer with (``queued=False, duplicate=True``), or None: the push
        goes on to its run's admission (unique keys, an ended run) and is queued.
        A duplicate never reaches the run, so it counts nowhere there.
    """
    if key_holder is not None:
        return key_holder
    return task_id if live else None


def at_take(
    body: TaskBody, *, cancel: bool, attempt: int, max_attempts: int, now: float
) -> TakeVerdict:
    """The verdict on a task a reserve popped.

    Args:
        body: The popped task.
        cancel: A cancel was requested while it waited.
        attempt: The attempt this delivery would be (the body's ``attempt + 1``).
        max_attempts: Its limit (the body's, else the reserve's default).
        now: The reserve's time.
    """
    if cancel:
        return "cancelled"
    if body.is_expired(now):
        return "expired"
    if attempt > max_attempts:
        return "exhausted"
    return "deliver"


def exhausted_error(attempt: int, max_attempts: int) -> str:
    """The ``last_error`` of a task dead-lettered by :func:`at_take`."""
    return (
        f"attempt {attempt} exceeds max_attempts={max_attempts}: "
        "earlier attempts were lost with their worker"
    )


def at_failure(*, dead: bool, attempt: int, max_attempts: int | None) -> NackOutcome:
    """A failed attempt (nack): ``dead`` when asked, or when it was the last one
    (a task without a limit has none left), else ``retry``."""
    if dead or max_attempts is None or attempt >= max_attempts:
        return "dead"
    return "retry"


def refund_at_loss(*, started: bool, attempt: int, refunds: int, max_attempts: int | None) -> bool:
    """Whether a sweep gives back the attempt of a lease that ran out: only one never
    marked started (it died unstarted with its worker), and at most
    :func:`~fleet.core.records.refund_cap` times per task."""
    return not started and attempt > 0 and refunds < refund_cap(max_attempts)
