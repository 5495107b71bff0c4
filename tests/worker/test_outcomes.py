"""The outcome → action table of a batch slot, and what settling each outcome does."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any, get_args

import pytest

from fleet.core.backoff import RetryPolicy
from fleet.core.outage import OutageLog
from fleet.worker.outcomes import (
    ACTIONS,
    CANCELLED,
    INTERRUPTED,
    LOST,
    OK,
    Action,
    Kind,
    Outcome,
    failed,
    invalid,
    throttled,
)
from fleet.worker.settle import settle
from fleet.worker.stats import SlotStats, TypeCounters


def test_every_outcome_has_one_action() -> None:
    assert set(ACTIONS) == set(get_args(Kind))
    assert set(ACTIONS.values()) == set(get_args(Action))  # no action left unused


def test_the_table() -> None:
    assert dict(ACTIONS) == {
        "ok": "ack",
        "cancelled": "ack",
        "failed": "nack",
        "invalid": "bury",
        "throttled": "throttle",
        "interrupted": "release",
        "lost": "nothing",
        "blocked": "release",
    }


def test_outcomes_without_details_are_shared() -> None:
    assert [o.kind for o in (OK, CANCELLED, INTERRUPTED, LOST)] == [
        "ok",
        "cancelled",
        "interrupted",
        "lost",
    ]
    try:
        raise ValueError("boom")
    except ValueError as exc:
        outcome = failed(exc)
    assert outcome.error == "ValueError: boom"
    assert outcome.traceback is not None and "raise ValueError" in outcome.traceback


class _Backend:
    """What settle reaches of a backend (its queues and groups), recording calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.queues = self.groups = self

    async def nack(self, automation_type: str, task_id: str, token: str, **kw: Any) -> str:
        assert kw["worker_id"] == "w-test"  # the attempt is recorded with its worker
        self.calls.append(("nack", kw["dead"], kw["error"]))
        return "dead" if kw["dead"] else "retry"

    async def throttle(
        self, automation_type: str, task_id: str, token: str, *, retry_after: float
    ) -> bool:
        self.calls.append(("throttle", retry_after))
        return True

    async def release(self, automation_type: str, task_id: str, token: str) -> bool:
        self.calls.append(("release",))
        return True


class _Acker:
    def __init__(self, calls: list[tuple[Any, ...]]) -> None:
        self.calls = calls

    def ack(self, task_id: str, token: str) -> None:
        self.calls.append(("ack", task_id, token))


def _slot(finished: list[str]) -> Any:
    """What settle uses of a slot."""
    backend = _Backend()
    log = logging.getLogger("test.outcomes")
    env = SimpleNamespace(
        automation_type="t",
        backend=backend,
        acker=_Acker(backend.calls),
        counters=TypeCounters(),
        policy=RetryPolicy(),
        outages=OutageLog(log),
    )
    return SimpleNamespace(
        env=env,
        stats=SlotStats(slot=0, started_at=0.0),
        ctx=SimpleNamespace(logger=log, worker_id="w-test"),
        attempt_started=None,
        settling="t: settling tasks",
        finished=lambda task_id, how: finished.append(how),
    )


def _error() -> Outcome:
    try:
        raise RuntimeError("no")
    except RuntimeError as exc:
        return failed(exc)


@pytest.mark.parametrize(
    ("outcome", "calls", "finished", "counted"),
    [
        (OK, [("ack", "t1", "tok")], "done", {"completed": 1}),
        (CANCELLED, [("ack", "t1", "tok")], "done", {"completed": 1}),
        (_error(), [("nack", False, "RuntimeError: no")], "retry", {"failed": 1, "retried": 1}),
        (invalid("t", ValueError("bad")), [("nack", True, "invalid payload for t: bad")], "dead",
         {"dead": 1}),
        (throttled(2.5), [("throttle", 2.5)], "throttled", {"throttled": 1}),
        (INTERRUPTED, [("release",)], "released", {}),
        (LOST, [], "stale", {}),
    ],
    ids=lambda v: v.kind if isinstance(v, Outcome) else None,
)  # fmt: skip
async def test_settling_carries_out_the_action(
    outcome: Outcome, calls: list[tuple[Any, ...]], finished: str, counted: dict[str, int]
) -> None:
    reported: list[str] = []
    slot = _slot(reported)
    res = SimpleNamespace(body=SimpleNamespace(id="t1", attempt=1, group=None), token="tok")
    await settle(slot, res, outcome)  # type: ignore[arg-type]
    assert slot.env.backend.calls == calls
    assert reported == [finished]
    counters = slot.env.counters
    fields = ("completed", "failed", "dead", "retried", "throttled")
    assert {f: getattr(counters, f) for f in fields if getattr(counters, f)} == counted
