"""The task state record of the Redis backend, in Python (pure functions).

Scripts keep what changes during a task's life in a record beside the immutable
body (see ``lua/queue_common.lua``)::

    s|a|m|p|k|c|x|d[|{"e": last_error, "t": traceback, "f": failed_at, "b": body,
                      "r": refunds, "g": group, "tr": trace id, "rn": run}]

``b`` is the body of a scheduled task (its ``:scheduled`` member) or of a dead one
(so a dead task is read by id). :func:`split_record` is the one reader of the
format; every other reader goes through :func:`parse_record` or it.

``d`` holds the task's times, ``finished_at/submitted_at/started_at[/worker]`` (a
record written before task records has only ``finished_at``; the worker that ran its
last attempt, quoted, once it finished). ``ah`` in the tail is the attempts that ended
without finishing it (:mod:`fleet.core.attempts`, workers quoted).

The eight hot fields are plain text so reserve and ack never run a JSON codec
on them; the JSON tail exists only after a failure, while scheduled, or once a
sweep refunded an attempt (``r``, see ``TaskBody.refunds``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fleet.core.attempts import unquote_worker
from fleet.core.records import TaskBody
from fleet.core.results import stored_output


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One decoded record (``None`` where the record leaves a field unset)."""

    state: str
    attempt: int | None = None
    max_attempts: int | None = None
    priority: int = 0
    token: str | None = None
    cancel: bool = False
    expires_at: float | None = None
    finished_at: float | None = None
    submitted_at: float | None = None
    started_at: float | None = None
    last_error: str | None = None
    traceback: str | None = None
    failed_at: float | None = None
    scheduled_body: str | None = None
    refunds: int = 0
    trace_id: str | None = None
    group: str | None = None
    run: str | None = None
    #: The stored attempts (:func:`fleet.core.attempts.entry` lists, workers unquoted).
    attempts: tuple[Any, ...] = ()
    #: The worker of the attempt that finished it (done or cancelled), where known.
    worker: str | None = None


def _int(text: str) -> int | None:
    if not text:
        return None
    try:
        return int(text)
    except ValueError:  # written as a float by hand or an older script
        return int(float(text))


def _float(text: str) -> float | None:
    return float(text) if text else None


def submitted_at(times: str) -> float | None:
    """The submitted time in a record's ``d`` field (``finished/submitted/started``)."""
    submitted = times.partition("/")[2].partition("/")[0]
    return float(submitted) if submitted else None


#: The plain fields of a record, in order (``REC_PATTERN`` and ``dec``/``enc`` in
#: ``lua/queue_common.lua``; ``tests/redis/test_lua_constants.py`` holds them equal).
RECORD_FIELDS = ("s", "a", "m", "p", "k", "c", "x", "d")
#: The keys of its JSON tail.
RECORD_TAIL = ("e", "t", "f", "b", "r", "g", "tr", "rn", "ah")
#: The state letters of a live or finished record (a dead one has none).
RECORD_STATES = {"q": "queued", "s": "scheduled", "p": "processing", "D": "done", "C": "cancelled"}


def split_record(raw: str) -> tuple[list[str], dict[str, Any]]:
    """The one reader of the record format: its plain fields (``RECORD_FIELDS``
    order, as text) and its JSON tail (empty when it has none).

    Raises:
        ValueError: ``raw`` is not a record.
    """
    parts = raw.split("|", 8)
    if len(parts) < 8:
        raise ValueError(f"not a task record: {raw[:80]!r}")
    extra: Any = json.loads(parts[8]) if len(parts) > 8 and parts[8] else {}
    if not isinstance(extra, dict):
        raise ValueError(f"not a task record: {raw[:80]!r}")
    return parts, extra


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def parse_record(raw: str) -> TaskRecord:
    """Decode a record written by the scripts.

    Raises:
        ValueError: ``raw`` is not a record.
    """
    parts, extra = split_record(raw)
    s, a, m, p, k, c, x, d = parts[:8]
    finished, _, rest = d.partition("/")
    started, _, worker = rest.partition("/")[2].partition("/")
    f = extra.get("f")
    return TaskRecord(
        state=s,
        attempt=_int(a),
        max_attempts=_int(m),
        priority=_int(p) or 0,
        token=k or None,
        cancel=bool(c),
        expires_at=_float(x),
        finished_at=_float(finished),
        submitted_at=submitted_at(d),
        started_at=_float(started),
        last_error=extra.get("e"),
        traceback=extra.get("t"),
        failed_at=None if f is None else float(f),
        scheduled_body=extra.get("b"),
        refunds=int(extra.get("r") or 0),
        trace_id=_str(extra.get("tr")),
        group=_str(extra.get("g")),
        run=_str(extra.get("rn")),
        attempts=_attempts(extra.get("ah")),
        worker=unquote_worker(worker),
    )


def _attempts(stored: Any) -> tuple[Any, ...]:
    """The tail's attempts with their workers' ids unquoted (what the scripts keep
    quoted, as in start marks)."""
    if not isinstance(stored, list):
        return ()
    out = []
    for e in stored:
        if isinstance(e, list) and len(e) > 1 and isinstance(e[1], str):
            e = [e[0], unquote_worker(e[1]), *e[2:]]
        out.append(e)
    return tuple(out)


def mark_parts(mark: str) -> tuple[float | None, str | None]:
    """The time and worker of a start mark ``<token>/<time>[/<worker>]``."""
    if not mark:
        return None, None
    _token, _, rest = mark.partition("/")
    at, _, worker = rest.partition("/")
    return _float(at), unquote_worker(worker)


def body_with_record(raw_body: str, rec: TaskRecord) -> TaskBody:
    """A delivered (or dead) body: the stored JSON with the record's mutable
    fields applied (attempt, max_attempts, last error, traceback, failed_at, refunds)."""
    d: dict[str, Any] = json.loads(raw_body)
    if "enqueued_at" not in d and rec.submitted_at is not None:
        d["enqueued_at"] = rec.submitted_at
    if rec.attempt is not None:
        d["attempt"] = rec.attempt
    if rec.max_attempts:
        d["max_attempts"] = rec.max_attempts
    d["last_error"] = rec.last_error
    d["traceback"] = rec.traceback
    d["failed_at"] = rec.failed_at
    d["refunds"] = rec.refunds
    d["attempts"] = list(rec.attempts)
    return TaskBody.from_dict(d)


def delivered_body(raw_body: str, raw_record: str) -> TaskBody:
    """``body_with_record(raw_body, parse_record(raw_record))`` for the reserve hot
    path: reads only the fields a delivery needs, without the intermediate record.

    Raises:
        ValueError: ``raw_record`` is not a record.
    """
    parts, extra = split_record(raw_record)
    d: dict[str, Any] = json.loads(raw_body)
    max_attempts = _int(parts[2]) or d.get("max_attempts")
    failed_at = extra.get("f")
    attempt = _int(parts[1])
    enqueued_at = d.get("enqueued_at")
    if enqueued_at is None:  # Fleet's own pushes keep it in the record only
        enqueued_at = submitted_at(parts[7])
    return TaskBody(
        id=str(d["id"]),
        payload=d.get("payload"),
        priority=int(d.get("priority", 0)),
        attempt=int(d.get("attempt", 0)) if attempt is None else attempt,
        max_attempts=None if max_attempts is None else int(max_attempts),
        enqueued_at=float(enqueued_at or 0.0),
        ttl_seconds=d.get("ttl_seconds"),
        last_error=extra.get("e"),
        traceback=extra.get("t"),
        failed_at=None if failed_at is None else float(failed_at),
        refunds=int(extra.get("r") or 0),
        group=None if d.get("group") is None else str(d["group"]),
        timeout_seconds=d.get("timeout_seconds"),
        traceparent=d.get("traceparent"),
        run=d.get("run"),
    )


def task_extras(
    rec: TaskRecord | None, mark: str, progress: str, total: str, envelopes: list[str]
) -> dict[str, Any]:
    """The keyword arguments of :meth:`TaskInfo.with_extras` from the state record
    and what ``task_state.lua`` read beside it (``mark``: a processing task's
    start mark ``<token>/<time>``)."""
    outputs: list[dict[str, Any]] = []
    for raw in envelopes:
        try:
            found = stored_output(json.loads(raw))
        except ValueError:
            continue
        if found is not None:
            outputs.append(found)
    try:
        decoded = json.loads(progress) if progress else None
    except ValueError:
        decoded = None
    started = mark_parts(mark)[0]
    return {
        "submitted_at": None if rec is None else rec.submitted_at,
        "started_at": started if started is not None or rec is None else rec.started_at,
        "progress": decoded if isinstance(decoded, dict) else None,
        "outputs": tuple(outputs),
        "outputs_total": _int(total) or 0,
    }
