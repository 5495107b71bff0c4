"""Conformance: a type's ``daily_budget`` (docs/costs.md) on every backend. The step
that adds the type's meters past it (its UTC day: the day's hour scopes summed, the
budget read from the stored type-wide config) holds the type's dispatch until the next
UTC day; ``unhold`` ends the hold at once; tasks wait, none is lost."""

from __future__ import annotations

from fleet.backends.base import Backend
from fleet.core.budgets import next_day
from fleet.core.clock import ManualClock
from fleet.core.meters import MeterBatch, hour_scope, type_scope
from fleet.core.records import PushRequest, TaskBody, new_id, now
from tests.conformance.helpers import TYPE


async def spend(b: Backend, at: float, **meters: float) -> None:
    batch = MeterBatch()
    for name, amount in meters.items():
        batch.add([type_scope(TYPE), hour_scope(TYPE, at)], name, amount)
    await b.meters.add(batch)


async def push(b: Backend, n: int) -> None:
    reqs = [PushRequest(TaskBody(id=new_id(), payload={}, enqueued_at=now())) for _ in range(n)]
    await b.queues.push(TYPE, reqs)


async def test_a_type_past_its_daily_budget_is_held_until_the_next_day(
    backend: Backend, frozen: ManualClock
) -> None:
    b = backend
    frozen.set(next_day(now()) + 3_600 * 5 + 30)  # 05:00:30 UTC of a day
    await b.configs.set(TYPE, {"daily_budget": {"requests": 10}})
    await push(b, 4)
    await spend(b, now(), requests=4)
    assert await b.meters.held(TYPE) is None
    assert len(await b.queues.reserve(TYPE, k=1, visibility_seconds=30)) == 1
    frozen.advance(3_600 * 2)  # another hour of the same day: the day sums its hours
    await spend(b, now(), requests=6)
    hold = await b.meters.held(TYPE)
    assert hold is not None and hold.until == next_day(now())
    assert hold.reason == "daily budget reached: requests 10 of 10"
    assert await b.queues.reserve(TYPE, k=5, visibility_seconds=30) == []
    depths = await b.queues.depths(TYPE)
    assert depths.normal == 3  # waiting, not lost
    frozen.set(next_day(now()) + 1)  # the next UTC day: dispatched again
    assert await b.meters.held(TYPE) is None
    assert len(await b.queues.reserve(TYPE, k=5, visibility_seconds=30)) == 3


async def test_unhold_ends_the_hold_and_no_budget_never_holds(
    backend: Backend, frozen: ManualClock
) -> None:
    b = backend
    frozen.set(next_day(now()) + 3_600)
    await push(b, 2)
    await spend(b, now(), spend=1e9)  # no daily_budget: nothing is held
    assert await b.meters.held(TYPE) is None
    await b.configs.set(TYPE, {"daily_budget": {"spend": 5}})
    await spend(b, now(), spend=1)
    hold = await b.meters.held(TYPE)
    assert hold is not None and hold.reason.startswith("daily budget reached: spend")
    assert await b.queues.reserve(TYPE, k=5, visibility_seconds=30) == []
    assert await b.meters.unhold(TYPE) is True
    assert await b.meters.unhold(TYPE) is False
    assert len(await b.queues.reserve(TYPE, k=5, visibility_seconds=30)) == 2
