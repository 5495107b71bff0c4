"""Turning a submit (``ctx.submit`` or REST) into a :class:`PushRequest`."""

from __future__ import annotations

import math
import os
from typing import Any

from fleet.core.errors import ContractValueError
from fleet.core.flow import check_group, check_plain
from fleet.core.records import PushRequest, TaskBody, new_id, now
from fleet.core.runs import CALLBACK_PREFIX, check_run_id, check_unique_key
from fleet.core.tracing import valid_traceparent

#: Default lifetime of idempotency keys (seconds); ``FLEET_IDEMPOTENCY_TTL_SECONDS``.
DEFAULT_IDEMPOTENCY_TTL = 86_400.0
MAX_TASK_ID_LEN = 200
MAX_IDEMPOTENCY_KEY_LEN = 500
#: Task ids and idempotency keys that start with this belong to schedule ticks: only
#: the schedule firer makes them, so no submit can pre-empt or replace a tick.
RESERVED_PREFIX = "schedule:"


def check_submitted_id(value: Any, *, field: str, max_len: int) -> str:
    """A task id or idempotency key a user submits: :func:`check_plain`, and not in
    the space reserved for schedule ticks; a task id (``field`` ``task_id``) not in
    the space of the runs' callbacks either (:data:`fleet.core.runs.CALLBACK_PREFIX`:
    only the step that ends a run pushes one).

    Raises:
        ContractValueError: naming ``field``.
    """
    check_plain(value, field=field, max_len=max_len)
    if value.startswith(RESERVED_PREFIX):
        raise ContractValueError(
            f"{field} must not start with {RESERVED_PREFIX!r}: that space belongs to "
            "schedule ticks",
            field=field,
        )
    if field == "task_id" and value.startswith(CALLBACK_PREFIX):
        raise ContractValueError(
            f"{field} must not start with {CALLBACK_PREFIX!r}: that space belongs to the "
            "callbacks of runs",
            field=field,
        )
    return str(value)


def check_timeout(value: Any) -> float:
    """A task's ``timeout_seconds``: a finite number of seconds > 0.

    Raises:
        ContractValueError: naming ``timeout_seconds``.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value < math.inf  # also NaN
    ):
        raise ContractValueError(
            "timeout_seconds must be a finite number of seconds > 0", field="timeout_seconds"
        )
    return float(value)


def idempotency_ttl() -> float:
    """The configured idempotency key lifetime."""
    raw = os.environ.get("FLEET_IDEMPOTENCY_TTL_SECONDS")
    try:
        return float(raw) if raw else DEFAULT_IDEMPOTENCY_TTL
    except ValueError:
        return DEFAULT_IDEMPOTENCY_TTL


def make_push_request(
    payload: Any,
    *,
    task_id: str | None = None,
    priority: int = 0,
    max_attempts: int | None = None,
    ttl_seconds: float | None = None,
    delay_seconds: float | None = None,
    idempotency_key: str | None = None,
    idempotency_ttl_seconds: float | None = None,
    group: str | None = None,
    tick: bool = False,
    timeout_seconds: float | None = None,
    traceparent: str | None = None,
    run: str | None = None,
    unique_key: str | None = None,
) -> PushRequest:
    """Validate submit options and build the request to push.

    Args:
        payload: The JSON payload (already validated against ``TaskPayload``).
        task_id: Explicit id; a new uuid hex if None.
        priority: ``>0`` high tier, ``0`` normal, ``<0`` low.
        max_attempts: Per-task override of ``Config.max_attempts`` (>= 1).
        ttl_seconds: Drop the task if not started within this many seconds (> 0).
        delay_seconds: Make the task pending only after this many seconds (>= 0).
        idempotency_key: Deduplicates submits of the same key (per type).
        idempotency_ttl_seconds: Lifetime of the key (default from the environment).
        group: Flow-control group (at most 200 characters, no control characters).
        timeout_seconds: Time limit of one ``run_one`` of the task (> 0, finite);
            wins over the receiver's ``Config.timeout_seconds``.
        traceparent: The W3C ``traceparent`` of the submit, kept with the task (one
            that is not valid is dropped, as W3C asks, not refused).
        run: The run the task joins (``fleet.core.runs``).
        unique_key: Within ``run``, a key pushed before makes this a duplicate
            (needs ``run``).
        tick: The schedule firer's own push: may use the reserved ``schedule:``
            space (:data:`RESERVED_PREFIX`); every other caller may not.

    Raises:
        ContractValueError: (a ``ValueError``) naming the bad option in ``field``.
    """
    check_id = check_plain if tick else check_submitted_id
    if task_id is not None:
        check_id(task_id, field="task_id", max_len=MAX_TASK_ID_LEN)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ContractValueError("priority must be an integer", field="priority")
    if max_attempts is not None and (
        isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1
    ):
        raise ContractValueError("max_attempts must be an integer >= 1", field="max_attempts")
    if ttl_seconds is not None and not ttl_seconds > 0:
        raise ContractValueError("ttl_seconds must be > 0", field="ttl_seconds")
    if delay_seconds is not None and not delay_seconds >= 0:
        raise ContractValueError("delay_seconds must be >= 0", field="delay_seconds")
    if timeout_seconds is not None:
        check_timeout(timeout_seconds)
    if idempotency_key is not None:
        check_id(idempotency_key, field="idempotency_key", max_len=MAX_IDEMPOTENCY_KEY_LEN)
    if group is not None:
        check_group(group)
    if run is not None:
        check_run_id(run)
    if unique_key is not None:
        check_unique_key(unique_key)
        if run is None:
            raise ContractValueError("unique_key needs a run", field="unique_key")
    body = TaskBody(
        id=task_id or new_id(),
        payload=payload,
        priority=priority,
        attempt=0,
        max_attempts=max_attempts,
        enqueued_at=now(),
        ttl_seconds=ttl_seconds,
        group=group,
        timeout_seconds=None if timeout_seconds is None else float(timeout_seconds),
        traceparent=None if traceparent is None else valid_traceparent(traceparent),
        run=run,
    )
    return PushRequest(
        body=body,
        delay_seconds=delay_seconds or 0.0,
        idempotency_key=idempotency_key,
        # The environment is read only when a key needs the lifetime (it costs
        # more than the rest of a bulk submit's request building).
        idempotency_ttl=idempotency_ttl_seconds
        or (idempotency_ttl() if idempotency_key is not None else DEFAULT_IDEMPOTENCY_TTL),
        unique_key=unique_key,
    )
