"""Conformance: task groups — fair dispatch, fleet-wide limits, pause, throttle."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from fleet.backends.base import Backend
from fleet.core.clock import ManualClock
from fleet.core.flow import GroupLimits, GroupSettings
from fleet.core.records import PushRequest, Reservation

from .helpers import SHORT, TYPE, blocked, body, reserve_one


def greq(task_id: str, group: str | None, *, priority: int = 0, **kw: Any) -> PushRequest:
    delay = kw.pop("delay_seconds", 0.0)
    return PushRequest(body(task_id, priority=priority, **kw).evolve(group=group), delay)


async def gpush(backend: Backend, group: str | None, *ids: str, **kw: Any) -> None:
    results = await backend.queues.push(TYPE, [greq(i, group, **kw) for i in ids])
    assert all(r.queued for r in results), results


async def take(backend: Backend, k: int = 50, **kw: Any) -> list[Reservation]:
    return await backend.queues.reserve(TYPE, k=k, **kw)


async def ids(backend: Backend, k: int = 50, **kw: Any) -> list[str]:
    return [r.body.id for r in await take(backend, k, **kw)]


async def ack(backend: Backend, *res: Reservation) -> None:
    assert all(await backend.queues.ack(TYPE, [(r.body.id, r.token) for r in res]))


async def test_groups_take_turns_round_robin(backend: Backend) -> None:
    await gpush(backend, "a", "a1", "a2", "a3", "a4", "a5")
    await gpush(backend, "b", "b1", "b2")
    await gpush(backend, "c", "c1")
    assert await ids(backend) == ["a1", "b1", "c1", "a2", "b2", "a3", "a4", "a5"]


async def test_single_reserves_take_turns_too(backend: Backend) -> None:
    await gpush(backend, "a", "a1", "a2", "a3")
    await gpush(backend, "b", "b1", "b2")
    await gpush(backend, None, "u1", "u2", "u3")
    order = []
    for _ in range(8):
        order += await ids(backend, k=1)
    # Tasks without a group and the groups alternate; the groups take turns.
    assert order == ["u1", "a1", "u2", "b1", "u3", "a2", "b2", "a3"]


async def test_grouped_task_round_trips_its_group(backend: Backend) -> None:
    await gpush(backend, "example.com", "t1")
    (r,) = await take(backend)
    assert r.body.group == "example.com"
    info = await backend.groups.info(TYPE, "example.com")
    assert (info.pending, info.running) == (0, 1)
    await ack(backend, r)
    info = await backend.groups.info(TYPE, "example.com")
    assert (info.pending, info.running) == (0, 0)


async def test_priority_holds_across_groups(backend: Backend) -> None:
    await gpush(backend, "a", "a-norm")
    await gpush(backend, None, "u-norm")
    await gpush(backend, "b", "b-low", priority=-1)
    await gpush(backend, "b", "b-high", priority=3)
    await gpush(backend, None, "u-high", priority=1)
    await gpush(backend, "a", "a-high", priority=1)
    got = await ids(backend)
    assert set(got[:3]) == {"b-high", "u-high", "a-high"}
    assert set(got[3:5]) == {"a-norm", "u-norm"}
    assert got[5:] == ["b-low"]


async def test_depths_count_grouped_tasks_in_their_tiers(backend: Backend) -> None:
    await gpush(backend, "a", "a1", "a2")
    await gpush(backend, "b", "b1", priority=2)
    await gpush(backend, None, "u1")
    d = await backend.queues.depths(TYPE)
    assert (d.high, d.normal, d.low) == (1, 3, 0)
    await take(backend, k=2)
    d = await backend.queues.depths(TYPE)
    assert (d.high + d.normal, d.processing) == (2, 2)


async def test_concurrency_cap_from_the_type(backend: Backend) -> None:
    limits = GroupLimits(concurrency=2)
    await backend.groups.set_defaults(TYPE, limits, gen=1)
    await gpush(backend, "a", *[f"a{i}" for i in range(5)])
    await gpush(backend, "b", *[f"b{i}" for i in range(5)])
    first = await take(backend)
    assert sorted(r.body.id for r in first) == ["a0", "a1", "b0", "b1"]
    assert await take(backend) == []
    await ack(backend, first[0])  # a0 ends: one more of a may start
    assert await ids(backend) == ["a2"]
    # A nack (retry), a release and a lost lease end reservations too.
    b0 = next(r for r in first if r.body.id == "b0")
    assert await backend.queues.nack(TYPE, "b0", b0.token, delay_seconds=60) == "retry"
    b1 = next(r for r in first if r.body.id == "b1")
    assert await backend.queues.release(TYPE, "b1", b1.token)
    assert sorted(await ids(backend)) == ["b1", "b2"]
    assert (await backend.groups.info(TYPE, "b")).running == 2


async def test_type_limits_are_stored_by_generation(backend: Backend) -> None:
    assert await backend.groups.defaults(TYPE) == (GroupLimits(), -1)
    assert await backend.groups.set_defaults(TYPE, GroupLimits.of(3, "10/m"), gen=5)
    assert await backend.groups.defaults(TYPE) == (GroupLimits.of(3, "10/m"), 5)
    # A worker applying an older config late cannot undo a newer one.
    assert not await backend.groups.set_defaults(TYPE, GroupLimits.of(9, None), gen=4)
    assert await backend.groups.defaults(TYPE) == (GroupLimits.of(3, "10/m"), 5)
    assert await backend.groups.set_defaults(TYPE, GroupLimits(), gen=5)
    assert await backend.groups.defaults(TYPE) == (GroupLimits(), 5)


async def test_a_cap_set_while_a_reserver_blocks_holds_at_once(backend: Backend) -> None:
    # The reserver blocked before the cap existed: it must read the stored value.
    waiter = asyncio.create_task(take(backend, k=50, timeout=5))
    await blocked(backend)
    await backend.groups.set_defaults(TYPE, GroupLimits(concurrency=1), gen=1)
    await gpush(backend, "a", "a1", "a2", "a3")
    await gpush(backend, "b", "b1", "b2")
    got = [r.body.id for r in await asyncio.wait_for(waiter, 5)]
    got += await ids(backend)
    assert sorted(got) == ["a1", "b1"]


async def test_raising_the_type_cap_wakes_a_blocked_reserver(backend: Backend) -> None:
    await backend.groups.set_defaults(TYPE, GroupLimits(concurrency=1), gen=1)
    await gpush(backend, "a", "a1", "a2")
    assert await ids(backend) == ["a1"]
    assert await ids(backend) == []  # saturated: set aside
    waiter = asyncio.create_task(take(backend, timeout=5))
    await blocked(backend)
    t0 = time.monotonic()
    await backend.groups.set_defaults(TYPE, GroupLimits(concurrency=2), gen=2)
    got = await asyncio.wait_for(waiter, 5)
    assert [r.body.id for r in got] == ["a2"]
    assert time.monotonic() - t0 < 2.5


async def test_dropping_the_type_rate_frees_a_delayed_group(backend: Backend) -> None:
    await backend.groups.set_defaults(TYPE, GroupLimits.of(None, "1/h"), gen=1)
    await gpush(backend, "a", "a1", "a2")
    assert await ids(backend) == ["a1"]
    assert await ids(backend) == []  # its rate holds it for an hour
    await backend.groups.set_defaults(TYPE, GroupLimits(), gen=2)
    assert await ids(backend) == ["a2"]


async def test_a_lost_lease_frees_its_place(backend: Backend, frozen: ManualClock) -> None:
    limits = GroupLimits(concurrency=1)
    await backend.groups.set_defaults(TYPE, limits, gen=1)
    await gpush(backend, "a", "a1", "a2")
    assert await ids(backend, visibility_seconds=SHORT) == ["a1"]
    assert await ids(backend) == []
    frozen.advance(SHORT + 0.1)
    assert await backend.queues.sweep(TYPE) == 1
    # Swept back to the head of its group, charged nothing (it never started).
    got = await take(backend)
    assert [r.body.id for r in got] == ["a1"]


async def test_group_settings_override_the_type(backend: Backend) -> None:
    await backend.groups.set(TYPE, "a", GroupSettings(concurrency=1))
    await gpush(backend, "a", "a1", "a2", "a3")
    await gpush(backend, "b", "b1", "b2", "b3")
    await backend.groups.set_defaults(TYPE, GroupLimits(concurrency=2), gen=1)
    got = await ids(backend)
    assert sorted(got) == ["a1", "b1", "b2"]
    info = await backend.groups.info(TYPE, "a")
    assert info.settings == GroupSettings(concurrency=1)
    assert (info.pending, info.running) == (2, 1)
    await backend.groups.reset(TYPE, "a")
    assert (await backend.groups.info(TYPE, "a")).settings is None
    assert await ids(backend) == ["a2"]


async def test_paused_group_holds_while_others_drain(backend: Backend) -> None:
    await backend.groups.set(TYPE, "slow", GroupSettings(paused=True))
    await gpush(backend, "slow", "s1", "s2")
    await gpush(backend, "fast", "f1", "f2")
    await gpush(backend, None, "u1")
    assert sorted(await ids(backend)) == ["f1", "f2", "u1"]
    assert await ids(backend) == []
    await backend.groups.set(TYPE, "slow", GroupSettings(paused=False))
    assert await ids(backend) == ["s1", "s2"]


async def test_resume_wakes_a_blocked_reserver(backend: Backend) -> None:
    await backend.groups.set(TYPE, "p", GroupSettings(paused=True))
    await gpush(backend, "p", "p1")
    waiter = asyncio.create_task(take(backend, timeout=5))
    await blocked(backend)
    t0 = time.monotonic()
    await backend.groups.set(TYPE, "p", GroupSettings())
    got = await asyncio.wait_for(waiter, 5)
    assert [r.body.id for r in got] == ["p1"]
    assert time.monotonic() - t0 < 2.5


async def test_a_saturated_group_does_not_block_the_others(backend: Backend) -> None:
    limits = GroupLimits(concurrency=1)
    await backend.groups.set_defaults(TYPE, limits, gen=1)
    await gpush(backend, "big", *[f"big{i}" for i in range(20)])
    for n in range(10):
        await gpush(backend, f"small{n}", f"s{n}")
    got = await ids(backend, k=100)
    assert got[0] == "big0" and sorted(got[1:]) == sorted(f"s{n}" for n in range(10))


async def test_an_ended_task_wakes_a_reserver_waiting_on_its_group(backend: Backend) -> None:
    limits = GroupLimits(concurrency=1)
    await backend.groups.set_defaults(TYPE, limits, gen=1)
    await gpush(backend, "a", "a1", "a2")
    (r1,) = await take(backend)
    waiter = asyncio.create_task(take(backend, timeout=5))
    await blocked(backend)
    t0 = time.monotonic()
    await ack(backend, r1)
    got = await asyncio.wait_for(waiter, 5)
    assert [r.body.id for r in got] == ["a2"]
    assert time.monotonic() - t0 < 2.5


async def test_rate_spaces_the_starts(backend: Backend) -> None:
    limits = GroupLimits.of(None, "5/s")  # one start every 0.2 s
    await backend.groups.set_defaults(TYPE, limits, gen=1)
    await gpush(backend, "a", *[f"a{i}" for i in range(4)])
    await gpush(backend, "b", "b0")
    first = await ids(backend)
    assert sorted(first) == ["a0", "b0"]
    assert await ids(backend) == []
    # A blocking reserve wakes when the rate allows the next start, not at its timeout.
    t0 = time.monotonic()
    got = await ids(backend, timeout=3)
    waited = time.monotonic() - t0
    assert got == ["a1"]
    assert 0.05 < waited < 1.0, waited
    info = await backend.groups.info(TYPE, "a")
    assert info.pending == 2


async def test_rate_from_group_settings(backend: Backend, frozen: ManualClock) -> None:
    await backend.groups.set(TYPE, "a", GroupSettings(rate="2/s"))
    await gpush(backend, "a", "a0", "a1")
    assert await ids(backend) == ["a0"]
    assert await ids(backend) == []
    frozen.advance(0.55)
    assert await ids(backend) == ["a1"]


async def test_throttle_holds_the_group_and_charges_nothing(backend: Backend) -> None:
    await gpush(backend, "a", "a1", "a2")
    await gpush(backend, "b", "b1", "b2")
    got = {r.body.id: r for r in await take(backend, k=2)}
    assert set(got) == {"a1", "b1"}
    assert await backend.groups.throttle(TYPE, "a1", got["a1"].token, retry_after=0.6)
    assert not await backend.groups.throttle(TYPE, "a1", got["a1"].token, retry_after=0.6)  # stale
    state = await backend.queues.state(TYPE, "a1")
    assert (state.state, state.attempt) == ("queued", 0)
    info = await backend.groups.info(TYPE, "a")
    assert info.throttled_until is not None and info.throttled_until > time.time()
    assert (info.pending, info.running) == (2, 0)
    # Only b while a is held; then a again, a1 first, on its first charged attempt.
    assert await ids(backend) == ["b2"]
    t0 = time.monotonic()
    r = await reserve_one(backend, timeout=3)
    assert r.body.id == "a1" and r.body.attempt == 1
    assert 0.3 < time.monotonic() - t0 < 2.0


async def test_throttle_without_a_group_schedules_the_task(backend: Backend) -> None:
    await gpush(backend, None, "u1")
    (r,) = await take(backend)
    assert await backend.groups.throttle(TYPE, "u1", r.token, retry_after=30)
    state = await backend.queues.state(TYPE, "u1")
    assert (state.state, state.attempt) == ("scheduled", 0)
    assert state.ready_at is not None and state.ready_at > time.time() + 25
    d = await backend.queues.depths(TYPE)
    assert (d.counters.failed, d.counters.throttled, d.scheduled, d.processing) == (0, 1, 1, 0)


async def test_retried_task_returns_to_its_group(backend: Backend, frozen: ManualClock) -> None:
    limits = GroupLimits(concurrency=1)
    await backend.groups.set_defaults(TYPE, limits, gen=1)
    await gpush(backend, "a", "a1")
    (r,) = await take(backend)
    assert await backend.queues.nack(TYPE, "a1", r.token, delay_seconds=0.05) == "retry"
    frozen.advance(0.1)
    await gpush(backend, "a", "a2")
    first = await take(backend)
    assert len(first) == 1 and first[0].body.group == "a"
    assert await take(backend) == []  # the cap applies to the retry too


async def test_dead_replay_returns_to_its_group(backend: Backend) -> None:
    await gpush(backend, "a", "a1", max_attempts=1)
    (r,) = await take(backend)
    assert await backend.queues.nack(TYPE, "a1", r.token, delay_seconds=0, dead=True) == "dead"
    assert (await backend.queues.dead_peek(TYPE))[0].group == "a"
    await backend.groups.set(TYPE, "a", GroupSettings(paused=True))
    assert await backend.queues.dead_replay(TYPE) == 1
    assert await ids(backend) == []
    assert (await backend.groups.info(TYPE, "a")).pending == 1


async def test_cancelled_grouped_task_is_dropped(backend: Backend) -> None:
    await gpush(backend, "a", "a1", "a2")
    assert await backend.queues.cancel(TYPE, "a1") == "cancelled"
    assert await ids(backend) == ["a2"]
    assert (await backend.queues.state(TYPE, "a1")).state == "cancelled"


async def test_group_list_pages_by_name(backend: Backend) -> None:
    for n in range(7):
        await gpush(backend, f"g{n}", f"t{n}", f"u{n}")
    await backend.groups.set(TYPE, "idle", GroupSettings(rate="1/m"))
    page = await backend.groups.page(TYPE, limit=3)
    assert [g.name for g in page.groups] == ["g0", "g1", "g2"]
    assert page.next == "g2"
    rest = await backend.groups.page(TYPE, after=page.next, limit=10)
    assert [g.name for g in rest.groups] == ["g3", "g4", "g5", "g6", "idle"]
    assert rest.next is None
    assert rest.groups[0].pending == 2
    assert rest.groups[-1].settings == GroupSettings(rate="1/m")


async def test_a_finished_group_leaves_the_list(backend: Backend) -> None:
    await gpush(backend, "gone", "t1")
    (r,) = await take(backend)
    assert [g.name for g in (await backend.groups.page(TYPE)).groups] == ["gone"]
    await ack(backend, r)
    assert (await backend.groups.page(TYPE)).groups == []


async def test_many_groups_each_get_a_turn(backend: Backend) -> None:
    limits = GroupLimits.of(1, "1/s")
    await backend.groups.set_defaults(TYPE, limits, gen=1)
    reqs = [greq(f"{g}-{i}", f"g{g}") for g in range(200) for i in range(3)]
    await backend.queues.push(TYPE, reqs)
    got = await take(backend, k=1000)
    assert sorted(r.body.group or "" for r in got) == sorted(f"g{g}" for g in range(200))
    assert await take(backend, k=1000) == []


@pytest.mark.parametrize("bad", [{"concurrency": 0}, {"rate": "fast"}, {"rate": "0/s"}])
def test_bad_settings_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        GroupSettings(**bad)
