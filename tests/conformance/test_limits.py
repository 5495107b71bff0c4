"""Conformance of the Limiters capability (``limit_acquire``/``renew``/``release``).

Timing checks bracket each backend call with the test's clock: a start the
backend admitted lies between the time read before the call and the time read
after it, so the rate guarantee (the k-th start comes at least k intervals after
the first) is asserted without assuming any latency.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core.capabilities.limits import CONCURRENCY_RETRY_SECONDS
from fleet.core.clock import ManualClock
from fleet.core.records import new_token

KEY = "conf-limit"
#: What one backend call takes on a stopped clock: a real call takes a moment, and
#: times near 1.8e9 s carry float error (~2e-7 s) that a zero-length call would expose.
ROUND_TRIP = 0.001


async def take(
    backend: Backend,
    token: str,
    *,
    key: str = KEY,
    interval: float | None = None,
    concurrency: int | None = None,
    hold: float = 10.0,
) -> float:
    return await backend.limits.acquire(
        key, token, interval=interval, concurrency=concurrency, hold_seconds=hold
    )


async def take_waiting(
    backend: Backend,
    token: str,
    *,
    interval: float | None = None,
    concurrency: int | None = None,
    clock: ManualClock | None = None,
) -> tuple[float, float]:
    """Acquire, waiting what the backend says; the (before, after) times of the
    successful call. With ``clock`` (stopped), the wait moves it; without, real time
    passes (other holders release on their own). Fails the test after 10 s."""
    give_up = time.monotonic() + 10
    read = clock.time if clock is not None else time.time
    while True:
        before = read()
        wait = await take(backend, token, interval=interval, concurrency=concurrency)
        if clock is not None:
            clock.advance(ROUND_TRIP)
        if wait == 0.0:
            return before, read()
        assert 0 < wait, wait
        assert time.monotonic() < give_up, "no place within 10 s"
        if clock is not None:
            clock.advance(wait)
        else:
            await asyncio.sleep(wait)


# ------------------------------------------------------------ concurrency


async def test_cap_and_release(backend: Backend) -> None:
    assert await take(backend, "t1", concurrency=2) == 0.0
    assert await take(backend, "t2", concurrency=2) == 0.0
    wait = await take(backend, "t3", concurrency=2)
    assert 0 < wait <= CONCURRENCY_RETRY_SECONDS
    assert await backend.limits.release(KEY, "t1")
    assert await take(backend, "t3", concurrency=2) == 0.0
    assert await take(backend, "t4", concurrency=2) > 0
    # A stale or unknown token answers False and frees nothing.
    assert not await backend.limits.release(KEY, "t1")
    assert not await backend.limits.release(KEY, "nobody")
    assert not await backend.limits.release("no-such-limiter", "t1")
    assert await take(backend, "t4", concurrency=2) > 0


async def test_retry_after_is_the_earliest_hold_end_capped(backend: Backend) -> None:
    assert await take(backend, "long", concurrency=1, hold=30) == 0.0
    wait = await take(backend, "t2", concurrency=1)
    assert wait == pytest.approx(CONCURRENCY_RETRY_SECONDS, abs=1e-6)
    assert await backend.limits.release(KEY, "long")
    assert await take(backend, "short", concurrency=1, hold=0.05) == 0.0
    wait = await take(backend, "t2", concurrency=1)
    assert 0 < wait <= 0.05


async def test_an_expired_hold_frees_its_place(backend: Backend, frozen: ManualClock) -> None:
    assert await take(backend, "dead", concurrency=1, hold=0.2) == 0.0
    assert await take(backend, "t2", concurrency=1) > 0
    frozen.advance(0.25)
    assert await take(backend, "t2", concurrency=1) == 0.0
    assert not await backend.limits.renew(KEY, "dead", 10)  # expired: not taken back
    assert not await backend.limits.release(KEY, "dead")
    assert await take(backend, "t3", concurrency=1) > 0  # t2 holds the one place


async def test_renew_keeps_a_place(backend: Backend, frozen: ManualClock) -> None:
    assert await take(backend, "t1", concurrency=1, hold=0.2) == 0.0
    for _ in range(2):
        frozen.advance(0.12)
        assert await backend.limits.renew(KEY, "t1", 0.2)
    assert await take(backend, "t2", concurrency=1) > 0  # 0.24 s > the first hold
    assert not await backend.limits.renew(KEY, "t2", 0.2)
    assert await backend.limits.release(KEY, "t1")
    assert not await backend.limits.renew(KEY, "t1", 0.2)


async def test_a_retried_acquire_keeps_one_place(backend: Backend) -> None:
    assert await take(backend, "t1", concurrency=2, interval=30) == 0.0
    # The same token again (its first answer lost): no second place, no second start.
    assert await take(backend, "t1", concurrency=2, interval=30) == 0.0
    assert await backend.limits.release(KEY, "t1")
    assert not await backend.limits.release(KEY, "t1")


async def test_cap_holds_under_many_concurrent_acquirers(backend: Backend) -> None:
    other = await open_backend(backend.url)  # a second connection: same limiter
    inflight = peak = done = 0

    async def worker(b: Backend) -> None:
        nonlocal inflight, peak, done
        token = new_token()
        await take_waiting(b, token, concurrency=3)
        inflight += 1
        peak = max(peak, inflight)
        await asyncio.sleep(0.02)
        inflight -= 1
        assert await b.limits.release(KEY, token)
        done += 1

    try:
        await asyncio.gather(*(worker(backend if i % 2 else other) for i in range(18)))
    finally:
        await other.close()
    assert done == 18
    assert peak == 3  # never above the cap, and the cap was used


# ------------------------------------------------------------ rate


async def test_rate_spaces_starts(backend: Backend, frozen: ManualClock) -> None:
    interval = 0.05  # "20/s"
    before, after = await take_waiting(backend, "s0", interval=interval, clock=frozen)
    wait = await take(backend, "s1", interval=interval)
    assert 0 < wait <= interval  # a second start right away is refused
    starts = [(before, after)]
    for i in range(1, 6):
        starts.append(await take_waiting(backend, f"s{i}", interval=interval, clock=frozen))
    first = starts[0][0]
    for k, (_, after_k) in enumerate(starts):
        assert after_k - first >= k * interval
    assert starts[-1][1] - first < 5 * interval + 2.0  # and not far slower


async def test_rate_with_many_concurrent_acquirers(backend: Backend, frozen: ManualClock) -> None:
    interval = 0.05
    got = await asyncio.gather(
        *(take_waiting(backend, f"r{i}", interval=interval, clock=frozen) for i in range(8))
    )
    first = min(b for b, _ in got)
    for k, after in enumerate(sorted(a for _, a in got)):
        # The k-th start (0-based) comes k intervals after the first, or later.
        assert after - first >= k * interval


async def test_rate_retry_after_is_exact(backend: Backend) -> None:
    assert await take(backend, "a", interval=60) == 0.0
    wait = await take(backend, "b", interval=60)
    assert 59 < wait <= 60
    assert await take(backend, "c", interval=60) == pytest.approx(wait, abs=0.5)
    # Releasing does not give the start back.
    assert await backend.limits.release(KEY, "a")
    assert await take(backend, "b", interval=60) > 59


async def test_rate_and_concurrency_together(backend: Backend, frozen: ManualClock) -> None:
    async def both(token: str, key: str = KEY, interval: float = 0.4) -> float:
        return await take(backend, token, key=key, concurrency=1, interval=interval)

    assert await both("t1") == 0.0
    frozen.advance(ROUND_TRIP)
    # Both bind: the wait is the larger of the two (the rate's here).
    wait = await both("t2")
    assert CONCURRENCY_RETRY_SECONDS < wait <= 0.4
    assert await backend.limits.release(KEY, "t1")
    # The place is free but the rate still holds t2 back.
    wait = await both("t2")
    assert 0 < wait <= 0.4
    frozen.advance(wait)
    assert await both("t2") == 0.0
    # The rate has room, but the one place is taken (for 10 s): the capped wait.
    assert await both("u1", key="other", interval=0.001) == 0.0
    frozen.advance(0.01)
    wait = await both("u2", key="other", interval=0.001)
    assert wait == pytest.approx(CONCURRENCY_RETRY_SECONDS, abs=1e-6)


async def test_a_rate_only_call_holds_a_place_too(backend: Backend) -> None:
    assert await take(backend, "rated", interval=0.01) == 0.0
    assert await take(backend, "capped", concurrency=1) > 0
    assert await backend.limits.release(KEY, "rated")
    assert await take(backend, "capped", concurrency=1) == 0.0


async def test_limiters_are_independent(backend: Backend) -> None:
    # Keys that look like the Redis suffixes must not share state either.
    keys = ["x", "x:tat", "x:holders", "x:holders:tat", "y"]
    for key in keys:
        assert await take(backend, "t", key=key, concurrency=1, interval=60) == 0.0
    for key in keys:
        assert await take(backend, "u", key=key, concurrency=1, interval=60) > 0
        assert await backend.limits.release(key, "t")
