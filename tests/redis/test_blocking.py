"""Blocking reserve on Redis: wakes on push and on due retries, never polls, and a
cancelled waiter loses no task."""

from __future__ import annotations

import asyncio
import random
import time

from fleet.backends.redis import RedisBackend
from fleet.core.records import PushRequest, TaskBody, new_id
from tests.conformance.helpers import blocked


def req(delay: float = 0.0) -> PushRequest:
    return PushRequest(TaskBody(id=new_id(), payload=None), delay)


async def round_trips(rb: RedisBackend) -> int:
    """Commands clients sent (script calls and BLPOPs, not the calls inside scripts)."""
    info = await rb._r.info("commandstats")
    return sum(int(info.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "blpop"))


async def test_blocked_reserve_wakes_on_push(rb: RedisBackend) -> None:
    waiter = asyncio.create_task(rb.queues.reserve("t", timeout=10))
    await blocked(rb)
    assert not waiter.done()
    t0 = time.monotonic()
    await rb.queues.push("t", [req()])
    got = await asyncio.wait_for(waiter, 9)
    assert len(got) == 1
    assert time.monotonic() - t0 < 5.0  # woken by the push, not the 10 s timeout


async def test_blocked_reserve_wakes_when_a_scheduled_task_comes_due(rb: RedisBackend) -> None:
    await rb.queues.push("t", [req(delay=0.5)])
    t0 = time.monotonic()
    got = await rb.queues.reserve("t", timeout=10)
    elapsed = time.monotonic() - t0
    assert len(got) == 1
    assert 0.4 < elapsed < 5.0


async def test_delayed_push_shortens_a_running_wait(rb: RedisBackend) -> None:
    waiter = asyncio.create_task(rb.queues.reserve("t", timeout=20))
    await blocked(rb)
    await rb.queues.push("t", [req(delay=0.3)])
    got = await asyncio.wait_for(waiter, 15)  # the wait it shortened was 20 s
    assert len(got) == 1


async def test_timeout_returns_empty(rb: RedisBackend) -> None:
    t0 = time.monotonic()
    assert await rb.queues.reserve("t", timeout=0.3) == []
    assert 0.25 < time.monotonic() - t0 < 3.0


async def test_blocked_reservers_do_not_block_other_commands(rb: RedisBackend) -> None:
    waiters = [asyncio.create_task(rb.queues.reserve("t", timeout=10)) for _ in range(20)]
    await blocked(rb, 20)
    t0 = time.monotonic()
    for _ in range(50):
        await rb.counters.incr("c", 1)
    assert time.monotonic() - t0 < 5.0  # blocked, they would wait for the 10 s reserves
    await rb.queues.push("t", [req() for _ in range(20)])
    got = await asyncio.wait_for(asyncio.gather(*waiters), 9)
    assert sorted(len(g) for g in got) == [1] * 20


async def test_idle_reservers_make_few_commands(rb: RedisBackend) -> None:
    stop = asyncio.Event()

    async def loop() -> None:
        while not stop.is_set():
            await rb.queues.reserve("idle", timeout=2.0)

    tasks = [asyncio.create_task(loop()) for _ in range(10)]
    await blocked(rb, 10)
    before = await round_trips(rb)
    await asyncio.sleep(3.0)
    used = await round_trips(rb) - before
    stop.set()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    # Each loop makes one script call and one BLPOP per 2 s wait: 20-40 in 3 s;
    # a polling loop would make thousands.
    assert used <= 45, used


async def test_cancelled_waiter_loses_no_task(rb: RedisBackend) -> None:
    waiter = asyncio.create_task(rb.queues.reserve("t", timeout=10))
    await blocked(rb)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    await rb.queues.push("t", [req()])
    got = await rb.queues.reserve("t", timeout=1)
    assert len(got) == 1


async def test_cancellation_at_any_point_loses_no_task(rb: RedisBackend) -> None:
    rng = random.Random(7)
    pushed = 40
    delivered: list[str] = []
    for _ in range(pushed):
        waiter = asyncio.create_task(rb.queues.reserve("t", k=2, timeout=5))
        await asyncio.sleep(rng.choice([0, 0, 0.001, 0.005]))
        await rb.queues.push("t", [req()])
        await asyncio.sleep(rng.choice([0, 0.0005, 0.002, 0.01]))
        waiter.cancel()
        result = (await asyncio.gather(waiter, return_exceptions=True))[0]
        if isinstance(result, list):
            delivered += [r.body.id for r in result]
    await asyncio.gather(*list(rb._background))  # releases of orphaned reservations
    depths = await rb.queues.depths("t")
    assert depths.processing == len(delivered)
    assert depths.pending + len(delivered) == pushed
    rest = await rb.queues.reserve("t", k=pushed)
    assert len(rest) == pushed - len(delivered)
    assert all(r.body.attempt == 1 for r in rest)  # released tasks got their attempt back


async def test_close_ends_blocked_reserves_and_subscriptions(redis_url: str) -> None:
    b = RedisBackend(redis_url)
    await b.connect()
    waiters = [asyncio.create_task(b.queues.reserve("t", timeout=30)) for _ in range(3)]
    sub = await b.events.subscribe("topic")
    reader = asyncio.create_task(sub.__anext__())
    await blocked(b, 3)
    await b.close()
    assert await asyncio.wait_for(asyncio.gather(*waiters), 5) == [[], [], []]
    results = await asyncio.wait_for(asyncio.gather(reader, return_exceptions=True), 5)
    assert isinstance(results[0], StopAsyncIteration)


async def test_cancelled_waiters_never_strand_a_task(rb: RedisBackend) -> None:
    # Many waiters, cancelled right as a task arrives: the task goes to one of
    # them or reaches the surviving waiter quickly.
    for _ in range(5):
        doomed = [asyncio.create_task(rb.queues.reserve("t", timeout=30)) for _ in range(5)]
        survivor = asyncio.create_task(rb.queues.reserve("t", timeout=30))
        await blocked(rb, 6)
        await rb.queues.push("t", [req()])
        for d in doomed:
            d.cancel()
        results = await asyncio.gather(*doomed, return_exceptions=True)
        got = [r for r in results if isinstance(r, list)]
        if not any(got):
            assert len(await asyncio.wait_for(survivor, 15)) == 1
        else:
            survivor.cancel()
            await asyncio.gather(survivor, return_exceptions=True)
        await asyncio.gather(*list(rb._background))
        depths = await rb.queues.depths("t")
        for lst in got:
            await rb.queues.ack("t", [(r.body.id, r.token) for r in lst])
        assert depths.pending == 0
        await rb.purge_type("t")


async def test_subscription_without_topics_waits_until_closed(rb: RedisBackend) -> None:
    sub = await rb.events.subscribe()
    reader = asyncio.create_task(sub.__anext__())
    await asyncio.sleep(0.1)
    assert not reader.done()
    await sub.aclose()
    results = await asyncio.wait_for(asyncio.gather(reader, return_exceptions=True), 10)
    assert isinstance(results[0], StopAsyncIteration)
