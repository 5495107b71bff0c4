"""Structured logs: ``FLEET_LOG_FORMAT=json`` makes every Fleet process write one JSON
object per line, with the task it concerns.

A slot binds what it is working on (:func:`bind`: the automation type, the task id and
attempt, the worker id) in a context variable, so every line logged while a task runs,
by Fleet or by the plugin's own loggers, carries them, and a line logged elsewhere does
not. Plain text stays the default; it ignores the bound fields.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Literal

from fleet.core.redact import RedactingFormatter, escape_controls, mask_credentials

#: The environment variable that picks the format, and its values.
ENV_FORMAT = "FLEET_LOG_FORMAT"
LogFormat = Literal["text", "json"]
FORMATS: tuple[LogFormat, ...] = ("text", "json")
#: The plain text line every Fleet process writes by default.
TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"

#: Fields a line may carry about the work it concerns (only those that apply).
FIELDS = ("type", "task_id", "attempt", "worker_id")

#: True once a JSON formatter was made in this process: only then are the fields worth
#: binding (a slot skips it per task otherwise: the hot path pays nothing).
STRUCTURED = False

_bound: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "fleet_log_fields", default=None
)


def log_format() -> LogFormat:
    """The format ``FLEET_LOG_FORMAT`` asks for (``text`` when unset).

    Raises:
        ValueError: naming the variable and the values it takes.
    """
    raw = os.environ.get(ENV_FORMAT, "text").strip().lower() or "text"
    if raw not in FORMATS:
        raise ValueError(f"{ENV_FORMAT}={raw!r}: use 'text' or 'json'")
    return "json" if raw == "json" else "text"


def fields() -> dict[str, Any]:
    """The fields bound in the current context (a copy)."""
    return dict(_bound.get() or {})


def bind_fields(**values: Any) -> contextvars.Token[dict[str, Any] | None]:
    """Add ``values`` to the current context's fields (None removes a field); returns
    the token :func:`reset_fields` takes to undo it."""
    merged = {**(_bound.get() or {}), **values}
    return _bound.set({k: v for k, v in merged.items() if v is not None})


def reset_fields(token: contextvars.Token[dict[str, Any] | None]) -> None:
    """Undo one :func:`bind_fields`."""
    _bound.reset(token)


@contextmanager
def bind(**values: Any) -> Iterator[None]:
    """The fields every line logged inside the block carries (``type``, ``task_id``,
    ``attempt``, ``worker_id``); nested blocks add to the outer one's."""
    token = bind_fields(**values)
    try:
        yield
    finally:
        reset_fields(token)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``time`` (ISO 8601, UTC), ``level``, ``logger``,
    ``message``, the bound fields that apply, and ``exception`` (the traceback's text)
    when there is one. Credentials are masked as in the text lines; the object is one
    line whatever the message holds."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": mask_credentials(escape_controls(record.getMessage()), keep_user=True),
        }
        out.update((k, v) for k, v in (_bound.get() or {}).items() if k in FIELDS)
        if record.exc_info:
            text = self.formatException(record.exc_info)
            out["exception"] = mask_credentials(text, keep_user=True)
        elif record.exc_text:
            out["exception"] = mask_credentials(record.exc_text, keep_user=True)
        return json.dumps(out, ensure_ascii=False, default=str)


def formatter(fmt: LogFormat | None = None) -> logging.Formatter:
    """The formatter of ``fmt`` (default: :func:`log_format`)."""
    global STRUCTURED
    if (fmt or log_format()) == "json":
        STRUCTURED = True
        return JsonFormatter()
    return RedactingFormatter(TEXT_FORMAT, "%H:%M:%S")
