"""A task's attempts: what each run of it did, kept with its record (issue 42).

The attempts that ended without finishing the task (failed and retried, dead, lost
with their worker) are stored as they end, the newest :data:`ATTEMPTS_KEPT`, each as a
short list (:func:`entry`): in the task's body on SQLite, in the record's JSON tail
(``ah``) on Redis. The attempt that is running, or that finished the task, is not
stored twice: it is read from the task's own started time, worker and end
(:func:`attempts_of`). Both engines build the answer with these functions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote, unquote

#: Attempts a record keeps (the newest; older ones are dropped as new ones end).
ATTEMPTS_KEPT = 10
#: Longest error text an attempt keeps (the task's ``last_error`` keeps it whole).
ERROR_CHARS = 300

Outcome = Literal["running", "done", "failed", "dead", "lost", "cancelled"]
#: The outcomes of a stored attempt (one that ended without finishing the task).
ENDED_OUTCOMES = frozenset({"failed", "dead", "lost"})


@dataclass(frozen=True, slots=True)
class Attempt:
    """One run of a task.

    Attributes:
        number: Its attempt number (1 for the first run).
        worker: The worker that ran it, where known.
        started_at: When its ``run_one`` began, where known.
        ended_at: When it ended (None while it runs).
        outcome: ``running``, ``done``, ``failed`` (retried), ``dead``, ``lost`` (its
            lease ran out: the worker died or hung) or ``cancelled``.
        error: What it failed with, cut at :data:`ERROR_CHARS`.
    """

    number: int
    worker: str | None
    started_at: float | None
    ended_at: float | None
    outcome: str
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.number,
            "worker": self.worker,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "outcome": self.outcome,
            "error": self.error,
        }


def entry(
    number: int,
    worker: str | None,
    started_at: float | None,
    ended_at: float,
    outcome: str,
    error: str | None,
) -> list[Any]:
    """The stored form of an attempt that ended: ``[n, worker, started, ended,
    outcome, error]`` (``lua/queue_common.lua``'s ``attempt_entry`` writes the same)."""
    return [number, worker, started_at, ended_at, outcome, cut_error(error)]


def appended(stored: Sequence[Any] | None, new: list[Any]) -> list[Any]:
    """``stored`` with ``new`` at its end, keeping the newest :data:`ATTEMPTS_KEPT`."""
    kept = [e for e in (stored or ()) if isinstance(e, list)]
    kept.append(new)
    return kept[-ATTEMPTS_KEPT:]


def cut_error(error: str | None) -> str | None:
    """``error`` as an attempt keeps it (at most :data:`ERROR_CHARS` characters)."""
    if error is None:
        return None
    return error if len(error) <= ERROR_CHARS else error[: ERROR_CHARS - 1] + "…"


def _num(value: Any) -> float | None:
    # A number, or its text (Redis keeps times as "%.17g" text: cjson rounds numbers).
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _parsed(raw: Any) -> Attempt | None:
    """A stored entry read back; None for one that is not one (never an error)."""
    if not isinstance(raw, list) or len(raw) < 5:
        return None
    n, worker, started, ended, outcome = raw[:5]
    error = raw[5] if len(raw) > 5 else None
    if isinstance(n, bool) or not isinstance(n, int) or not isinstance(outcome, str):
        return None
    return Attempt(
        number=n,
        worker=worker if isinstance(worker, str) else None,
        started_at=_num(started),
        ended_at=_num(ended),
        outcome=outcome,
        error=error if isinstance(error, str) else None,
    )


def attempts_of(
    stored: Sequence[Any] | None,
    *,
    state: str,
    attempt: int,
    started_at: float | None,
    finished_at: float | None,
    worker: str | None,
) -> tuple[Attempt, ...]:
    """Every attempt a record knows, oldest first: the stored ones, then the one
    running (``processing``) or the one that finished the task (``done``, or
    ``cancelled`` while it ran), from the task's own fields.

    Args:
        stored: The stored entries (:func:`entry` lists), oldest first.
        state: The task's state (``queued``, ``processing``, ``done``, ``dead``...).
        attempt: Its attempt number now.
        started_at: When its latest attempt began, where known.
        finished_at: When it finished (done, cancelled).
        worker: The worker of its latest attempt, where known.
    """
    out = [a for a in (_parsed(e) for e in stored or ()) if a is not None]
    last = out[-1].number if out else 0
    if state == "processing" and attempt > last:
        out.append(Attempt(attempt, worker, started_at, None, "running"))
    elif state in ("done", "cancelled") and attempt > last and (started_at or worker):
        outcome = "done" if state == "done" else "cancelled"
        out.append(Attempt(attempt, worker, started_at, finished_at, outcome))
    return tuple(out)


def last_started(attempts: Sequence[Attempt]) -> float | None:
    """When the latest attempt that has a start began (a dead task's ``started_at``)."""
    for a in reversed(attempts):
        if a.started_at is not None:
            return a.started_at
    return None


def quote_worker(worker: str) -> str:
    """A worker id as the records keep it (``/``, ``|`` and ``%`` escaped)."""
    return quote(worker, safe="")


def unquote_worker(text: str) -> str | None:
    """The worker id of a record's text (None for empty)."""
    return unquote(text) if text else None
