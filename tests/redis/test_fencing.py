"""Leases under races: an ack racing a sweep, and concurrent reservers."""

from __future__ import annotations

import asyncio

import pytest

from fleet.backends.redis import RedisBackend
from fleet.core.clock import ManualClock
from fleet.core.records import PushRequest, TaskBody, new_id


def reqs(n: int) -> list[PushRequest]:
    return [PushRequest(TaskBody(id=new_id(), payload=i)) for i in range(n)]


async def test_ack_racing_sweep_never_redelivers_a_finished_task(
    rb: RedisBackend, frozen: ManualClock
) -> None:
    for _ in range(5):
        await rb.queues.push("t", reqs(40))
        held = await rb.queues.reserve("t", k=40, visibility_seconds=0.05)
        assert len(held) == 40
        frozen.advance(0.08)
        results = await asyncio.gather(
            *[rb.queues.ack("t", [(r.body.id, r.token)]) for r in held[:20]],
            rb.queues.sweep("t"),
            *[rb.queues.ack("t", [(r.body.id, r.token)]) for r in held[20:]],
        )
        swept = results[20]
        assert isinstance(swept, int)
        oks = [r[0] for r in results[:20] + results[21:] if isinstance(r, list)]
        acked = {r.body.id for r, ok in zip(held, oks, strict=True) if ok}
        again = await rb.queues.reserve("t", k=100)
        again_ids = {r.body.id for r in again}
        assert not acked & again_ids
        assert len(acked) + len(again_ids) == 40
        assert swept == len(again_ids)
        assert all(await rb.queues.ack("t", [(r.body.id, r.token) for r in again]))
        for r in held:
            if r.body.id in again_ids:  # the old token lost the task for good
                assert await rb.queues.ack("t", [(r.body.id, r.token)]) == [False]
    depths = await rb.queues.depths("t")
    assert depths.pending == depths.processing == 0
    assert depths.counters.completed == 200


async def test_concurrent_reservers_get_each_task_once(redis_url: str, rb: RedisBackend) -> None:
    others = [RedisBackend(redis_url) for _ in range(3)]
    try:
        await rb.queues.push("t", reqs(300))
        seen: list[str] = []

        async def drain(b: RedisBackend) -> None:
            while True:
                got = await b.queues.reserve("t", k=7)
                if not got:
                    return
                seen.extend(r.body.id for r in got)
                assert all(await b.queues.ack("t", [(r.body.id, r.token) for r in got]))

        await asyncio.gather(*(drain(b) for b in [rb, *others, rb]))
        assert len(seen) == len(set(seen)) == 300
    finally:
        for b in others:
            await b.close()


async def test_stale_tokens_are_refused_everywhere(rb: RedisBackend, frozen: ManualClock) -> None:
    await rb.queues.push("t", reqs(1))
    first = (await rb.queues.reserve("t", visibility_seconds=0.05))[0]
    assert await rb.queues.mark_started("t", [(first.body.id, first.token)]) == [True]
    frozen.advance(0.08)
    assert await rb.queues.sweep("t") == 1
    second = (await rb.queues.reserve("t"))[0]
    assert second.body.id == first.body.id and second.token != first.token
    tid = first.body.id
    assert await rb.queues.ack("t", [(tid, first.token)]) == [False]
    assert await rb.queues.nack("t", tid, first.token, delay_seconds=0) == "stale"
    assert await rb.queues.release("t", tid, first.token) is False
    assert (await rb.queues.extend("t", tid, first.token, 10)).value == "stale"
    assert await rb.queues.ack("t", [(tid, second.token)]) == [True]
    # The sweep kept the attempt charged (it was marked started): the second attempt.
    assert second.body.attempt == 2


async def test_sweep_requeues_everything_in_bounded_calls(
    rb: RedisBackend, monkeypatch: pytest.MonkeyPatch, frozen: ManualClock
) -> None:
    from fleet.backends.redis import queues as redis_queue

    monkeypatch.setattr(redis_queue, "SWEEP_CHUNK", 4)
    await rb.queues.push("t", reqs(10))
    got = await rb.queues.reserve("t", k=10, visibility_seconds=0.05)
    assert await rb.queues.mark_started("t", [(r.body.id, r.token) for r in got[:5]]) == [True] * 5
    frozen.advance(0.08)
    assert await rb.queues.sweep("t") == 10
    depths = await rb.queues.depths("t")
    assert (depths.pending, depths.processing) == (10, 0)
    again = await rb.queues.reserve("t", k=10)
    started = {r.body.id for r in got[:5]}
    # Marked started: charged; never started: refunded (across the chunked calls).
    assert sorted(r.body.attempt for r in again) == [1] * 5 + [2] * 5
    assert all((r.body.attempt == 2) == (r.body.id in started) for r in again)
    assert all(r.body.refunds == (0 if r.body.id in started else 1) for r in again)
