"""How one attempt of a batch task ended, and what the slot does about it.

The steps of a batch slot (:mod:`fleet.worker.steps`) turn whatever happened —
``run_one`` returned or raised, the payload did not validate, the task was
cancelled, the slot was stopped, the lease was lost — into one :class:`Outcome`.
:data:`ACTIONS` is the one table from an outcome to what settles the task; the
slot carries the action out (:mod:`fleet.worker.settle`) and reports the task
:data:`Finished`.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal

#: How an attempt ended:
#:
#: - ``ok``: ``run_one`` returned.
#: - ``cancelled``: cancelled through the API, before or while it ran.
#: - ``failed``: ``run_one`` (or taking its proxy) raised.
#: - ``invalid``: the payload does not validate against ``TaskPayload``; it never ran.
#: - ``throttled``: ``run_one`` raised ``Throttled``.
#: - ``interrupted``: the slot was stopped before or while it ran (shutdown).
#: - ``lost``: the lease was lost; the task is another attempt's now.
#: - ``blocked``: ``ctx.identity.blocked()``: the site refused the identity.
Kind = Literal[
    "ok", "cancelled", "failed", "invalid", "throttled", "interrupted", "lost", "blocked"
]

#: What settles a task:
#:
#: - ``ack``: done (batched by the ``AckBatcher``).
#: - ``nack``: a failed attempt: retried after a backoff, or dead-lettered once
#:   its attempts are spent (the backend decides).
#: - ``bury``: straight to the dead letters, whatever attempts are left.
#: - ``throttle``: back uncharged; its group (or the task) waits ``retry_after``.
#: - ``release``: back at the head of its tier, its attempt refunded.
#: - ``nothing``: the token is stale, the backend would refuse any of the above.
Action = Literal["ack", "nack", "bury", "throttle", "release", "nothing"]

#: How a task's turn in a slot ended, reported to ``SlotEnv.on_finished``.
Finished = Literal["done", "dead", "retry", "released", "stale", "throttled"]

#: The one table from an outcome to its action.
ACTIONS: Final[Mapping[Kind, Action]] = MappingProxyType(
    {
        "ok": "ack",
        # A cancel asks for the task to be over, not retried.
        "cancelled": "ack",
        "failed": "nack",
        # Another attempt would fail the same way.
        "invalid": "bury",
        "throttled": "throttle",
        # The task did nothing wrong: it gets its attempt back.
        "interrupted": "release",
        "lost": "nothing",
        # The identity was refused, not the task: another identity tries it, uncharged.
        "blocked": "release",
    }
)


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one attempt ended.

    The outcomes without details are shared constants (:data:`OK`,
    :data:`CANCELLED`, :data:`INTERRUPTED`, :data:`LOST`): a task that succeeds
    allocates no outcome.

    Attributes:
        kind: What happened.
        error: ``failed`` and ``invalid``: the error, one line.
        traceback: ``failed``: the formatted traceback.
        retry_after: ``throttled``: seconds to hold the group (or the task).
    """

    kind: Kind
    error: str | None = None
    traceback: str | None = None
    retry_after: float = 0.0


OK: Final = Outcome("ok")
CANCELLED: Final = Outcome("cancelled")
INTERRUPTED: Final = Outcome("interrupted")
LOST: Final = Outcome("lost")
BLOCKED: Final = Outcome("blocked")


def failed(exc: BaseException) -> Outcome:
    """``run_one`` raised ``exc`` (call it in the ``except`` block: it formats
    the traceback being handled)."""
    return Outcome("failed", error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())


def invalid(automation_type: str, exc: Exception) -> Outcome:
    """The payload did not validate against the type's ``TaskPayload``."""
    return Outcome("invalid", error=f"invalid payload for {automation_type}: {exc}")


def throttled(retry_after: float) -> Outcome:
    """``run_one`` raised ``Throttled(retry_after)``."""
    return Outcome("throttled", retry_after=retry_after)
