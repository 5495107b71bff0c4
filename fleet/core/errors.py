"""The one exception tree of Fleet, rooted at :class:`FleetError`.

Errors carry the context an operator needs to act on them: the automation type,
the task id and, for validation problems, the field. Errors that the spec promises
as ``TypeError`` or ``ValueError`` also inherit from those builtins so plugin code
can catch either.
"""

from __future__ import annotations

from typing import Any


class FleetError(Exception):
    """Base class of every error Fleet raises on purpose.

    Args:
        message: What went wrong, in words an operator understands.
        automation_type: The automation type involved, if any.
        task_id: The task involved, if any.
        field: The offending field (dotted path), for validation errors.
    """

    def __init__(
        self,
        message: str,
        *,
        automation_type: str | None = None,
        task_id: str | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.automation_type = automation_type
        self.task_id = task_id
        self.field = field

    def context(self) -> dict[str, Any]:
        """The error's context as a JSON-able dict (for logs and API answers)."""
        out: dict[str, Any] = {"error": type(self).__name__, "message": self.message}
        for name in ("automation_type", "task_id", "field"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    def __str__(self) -> str:
        parts = [self.message]
        for name in ("automation_type", "task_id", "field"):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name}={value}")
        return " ".join(parts) if len(parts) == 1 else f"{parts[0]} ({', '.join(parts[1:])})"


class ContractTypeError(FleetError, TypeError):
    """A value crossed a typed boundary (emit, submit, pool put) with the wrong type."""


class ContractValueError(FleetError, ValueError):
    """A value has the right type but is not allowed (e.g. an unknown tag field)."""


class RegistrationError(FleetError, TypeError):
    """An automation class is malformed or its name clashes with another class."""


class ConfigError(FleetError, ValueError):
    """A configuration (settings, automation config, backend URL) is invalid."""


class PayloadValidationError(FleetError, ValueError):
    """A task payload does not validate against the automation's ``TaskPayload``.

    Args:
        errors: Pydantic's error list (``loc``, ``msg``, ``type``) for the payload.
    """

    def __init__(
        self,
        message: str,
        *,
        errors: list[dict[str, Any]] | None = None,
        automation_type: str | None = None,
        task_id: str | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message, automation_type=automation_type, task_id=task_id, field=field)
        self.errors = errors or []


class UnknownAutomation(FleetError, LookupError):
    """No automation of this type is registered or catalogued."""


class BackendError(FleetError):
    """A storage backend failed to do what was asked."""


class BackendUnavailable(BackendError, ConnectionError):
    """The backend cannot be reached right now; the caller may retry later."""


class BackendBusy(BackendUnavailable):
    """Every connection this process may open to the backend stayed in use for the
    whole wait (a load of this process's own making): the backend itself answers,
    so this is no outage. A ``BackendUnavailable`` so the callers that retry, retry;
    the master answers it 503 with ``Retry-After`` and logs no outage."""


class UnsupportedBackend(BackendError, ValueError):
    """No backend is known for this URL scheme, or its driver is not installed."""


class SchemaVersionError(BackendError):
    """A storage file was written by a newer Fleet than this one."""


class StaleLease(FleetError):
    """A lease token no longer owns the task, pool item or lock it names."""


class PluginLoadError(FleetError, ImportError):
    """A plugin entry point failed to import or does not name an automation."""


class BrowserUnavailable(FleetError):
    """``ctx.browser`` cannot give a page: Playwright or the browser binary is
    missing, the engine is unsupported, every launch failed, or no browser
    became free in time."""


class TaskTimeout(FleetError):
    """``run_one`` ran past its time limit (``timeout_seconds`` of the task or of the
    type's config) and was cancelled: a failed attempt, retried like any failure,
    dead-lettered once its attempts are spent. The task's ``last_error`` (and its
    dead letter's) starts with ``TaskTimeout:``."""


class TaskFailed(FleetError):
    """A submitted task ended dead (its attempts spent), or left no record: what
    ``handle.result()`` raises; the message carries the task's last error."""


class TaskCancelledError(FleetError):
    """``handle.result()`` of a task that was cancelled."""


class ResultTimeout(FleetError, TimeoutError):
    """``handle.result(timeout=)`` ran out before the task ended (the task goes on)."""


class Throttled(FleetError):
    """The outside world asked Fleet to slow down.

    Raised from ``run_one`` (the site answered 429): the task goes back to its
    queue without an attempt charged, and its group — every task of that group on
    every worker — starts nothing for ``retry_after`` seconds; a task without a
    group is simply retried after ``retry_after``. ``ctx.limit`` raises it when its
    wait for the limiter runs out.

    Args:
        retry_after: Seconds to hold the group (> 0, at most a day).
        message: What happened (default: a sentence naming ``retry_after``).
    """

    MAX_RETRY_AFTER = 86_400.0

    def __init__(
        self,
        retry_after: float = 1.0,
        message: str | None = None,
        *,
        automation_type: str | None = None,
        task_id: str | None = None,
    ) -> None:
        try:
            seconds = float(retry_after)
        except (TypeError, ValueError):
            seconds = 1.0
        if not seconds > 0:  # also NaN
            seconds = 1.0
        self.retry_after = min(seconds, self.MAX_RETRY_AFTER)
        super().__init__(
            message or f"throttled: retry after {self.retry_after:g} s",
            automation_type=automation_type,
            task_id=task_id,
        )


class InvalidInput(FleetError, ValueError):
    """A request's input does not validate: the master answers 422 with ``errors``.

    Args:
        errors: FastAPI-shaped errors, each ``{"type", "loc", "msg", "input"?}``.
    """

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(str(errors[0]["msg"]) if errors else "invalid input")
        self.errors = errors


class Refused(FleetError):
    """A request the master cannot carry out as asked, and why: the base of the
    errors below. The master's HTTP edge (``fleet/master/http/errors.py``) gives
    each subclass its status; its ``detail`` is :attr:`detail`.

    Args:
        message: What went wrong, in words the caller can act on.
        resource: The kind of thing involved (``"automation type"``, ``"run"``, ...).
        key: Which one (its name or id).
        hint: Said after the message: ``"; did you mean 'x'?"``, or ``""``.
    """

    def __init__(
        self,
        message: str,
        *,
        resource: str | None = None,
        key: str | None = None,
        hint: str = "",
        automation_type: str | None = None,
        task_id: str | None = None,
    ) -> None:
        super().__init__(message, automation_type=automation_type, task_id=task_id)
        self.resource = resource
        self.key = key
        self.hint = hint

    @property
    def detail(self) -> str:
        """The message and its hint: what the caller reads."""
        return self.message + self.hint

    def context(self) -> dict[str, Any]:
        out = super().context()
        out.update({k: v for k, v in (("resource", self.resource), ("key", self.key)) if v})
        if self.hint:
            out["hint"] = self.hint
        return out


class NotFound(Refused, LookupError):
    """The resource named (a type, task, run, worker, pool, schedule) does not exist."""


class Conflict(Refused):
    """The resource exists but its state forbids the request (a type without a task
    queue, a run that ended, a schedule that exists already)."""


class Forbidden(Refused, PermissionError):
    """The caller's token may not do this to this resource."""


class TooLarge(Refused, ValueError):
    """A value is over the size the master accepts."""


class Unsupported(Refused):
    """The backend does not implement what the request needs, or this process lacks
    the optional extra it needs (browserforge for generated identities)."""


class RetryLater(Refused):
    """What the request needs cannot be read right now; the same request later may
    succeed (a catalog entry being published again)."""
