"""What a task's record keeps beside its state: progress and the outputs it
emitted, and how long finished records are kept (docs/operations.md, "Task
records").

Pure data and settings: every backend shares these rules.
"""

from __future__ import annotations

import math
import os
from typing import Any

#: Outputs a task's record keeps (the newest; ``outputs_total`` counts them all).
RECORD_MAX_OUTPUTS = 100
#: Largest output payload a task's record keeps whole (bytes of its JSON); a bigger
#: one is kept as a marker (``truncated``, its ``bytes``), whole in the output
#: stream only. With :data:`RECORD_MAX_OUTPUTS`, a record holds at most ~800 KB.
RECORD_OUTPUT_MAX_BYTES = 8192
#: Longest progress message (characters).
PROGRESS_MAX_MESSAGE = 200
#: A slot writes its task's progress at most this often (seconds); the latest
#: report wins and is flushed when the task ends.
PROGRESS_INTERVAL = 0.5
#: Default of ``FLEET_RESULT_TTL_SECONDS``: how long a finished task's record stays.
DEFAULT_RESULT_TTL = 86400.0
#: Default of ``FLEET_RESULT_MAX_PER_TYPE``: finished records kept per type at most
#: (the oldest finished are dropped first).
DEFAULT_RESULT_MAX = 100_000
#: Longest ``?wait=`` of ``GET .../tasks/{id}`` (seconds).
MAX_WAIT_SECONDS = 60.0
#: Task states that end a task (its record no longer changes, but for a replay).
FINAL_STATES = frozenset({"done", "cancelled", "dead"})


def _env_number(name: str, default: float, minimum: float) -> float:
    raw = os.environ.get(name)
    try:
        value = float(raw) if raw else default
    except ValueError:
        return default
    if not math.isfinite(value) or value < minimum:
        return default
    return value


def result_ttl() -> float:
    """``FLEET_RESULT_TTL_SECONDS`` (default 86400): a finished task's record is
    answered this long after it ended."""
    return _env_number("FLEET_RESULT_TTL_SECONDS", DEFAULT_RESULT_TTL, 1.0)


def result_max_per_type() -> int:
    """``FLEET_RESULT_MAX_PER_TYPE`` (default 100,000): finished records kept per
    automation type at most; past it the oldest finished go first."""
    return int(_env_number("FLEET_RESULT_MAX_PER_TYPE", DEFAULT_RESULT_MAX, 1.0))


def check_progress(fraction: float | None, message: str | None) -> tuple[float | None, str | None]:
    """Validate a ``ctx.progress`` report.

    Raises:
        ValueError: neither given, ``fraction`` outside 0..1 (or not a number),
            or ``message`` longer than :data:`PROGRESS_MAX_MESSAGE` characters.
    """
    if fraction is None and message is None:
        raise ValueError("ctx.progress needs a fraction (0..1), a message, or both")
    if fraction is not None:
        if isinstance(fraction, bool) or not isinstance(fraction, int | float):
            raise ValueError(f"progress fraction must be a number in 0..1, got {fraction!r}")
        if not 0.0 <= fraction <= 1.0:  # also NaN
            raise ValueError(f"progress fraction must be in 0..1, got {fraction!r}")
        fraction = float(fraction)
    if message is not None:
        if not isinstance(message, str):
            raise ValueError(f"progress message must be a string, got {type(message).__name__}")
        if len(message) > PROGRESS_MAX_MESSAGE:
            raise ValueError(
                f"progress message is {len(message)} characters; at most "
                f"{PROGRESS_MAX_MESSAGE} are allowed"
            )
    return fraction, message


def progress_record(
    fraction: float | None, message: str | None, attempt: int, at: float
) -> dict[str, Any]:
    """The ``progress`` of a task's record (and of the ``<type>.progress`` event)."""
    return {"fraction": fraction, "message": message, "attempt": attempt, "at": at}


def output_record(
    entry_id: str, ts: float, attempt: int | None, payload: Any, size: int = 0
) -> dict[str, Any]:
    """One output in a task's record: the stream entry's id, time, attempt, payload.

    ``size`` is the bytes of the payload's JSON: past :data:`RECORD_OUTPUT_MAX_BYTES`
    the record keeps ``payload: None, truncated: True, bytes: size`` instead (the
    output itself is whole in the type's output stream)."""
    if size > RECORD_OUTPUT_MAX_BYTES:
        return {
            "id": entry_id,
            "ts": ts,
            "attempt": attempt,
            "payload": None,
            "truncated": True,
            "bytes": size,
        }
    return {"id": entry_id, "ts": ts, "attempt": attempt, "payload": payload}


def json_size(text: str) -> int:
    """Bytes of ``text`` in UTF-8 (an ASCII string's length, without encoding it)."""
    return len(text) if text.isascii() else len(text.encode())


def stored_output(value: Any) -> dict[str, Any] | None:
    """An output as a record stores it (:func:`output_record`'s dict), read back;
    None for a value that is not one (a corrupt record is skipped, not an error)."""
    if not isinstance(value, dict) or not isinstance(value.get("id"), str):
        return None
    ts = value.get("ts")
    attempt = value.get("attempt")
    out = {
        "id": value["id"],
        "ts": float(ts) if isinstance(ts, int | float) else 0.0,
        "attempt": attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else None,
        "payload": value.get("payload"),
    }
    if value.get("truncated") is True:
        size = value.get("bytes")
        out["payload"] = None
        out["truncated"] = True
        out["bytes"] = size if isinstance(size, int) else 0
    return out


def progress_topic(automation_type: str) -> str:
    """The event topic of a type's progress reports."""
    return f"{automation_type}.progress"


def record_lifetime() -> int:
    """Seconds a record key lives after its last write on Redis: the result TTL
    plus an hour, so a task that reports and then runs on for up to an hour keeps
    its record; the finished index drops it ``result_ttl()`` after the task ended."""
    return math.ceil(result_ttl()) + 3600
