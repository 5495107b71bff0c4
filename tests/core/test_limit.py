"""``ctx.limit`` (fleet.core.limit.Limit) over every backend: waiting, giving up
with ``Throttled``, renewal, release on every way out, and one quota shared by
several connections, automation types and processes."""

from __future__ import annotations

import asyncio
import itertools
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.backends.memory import MemoryBackend
from fleet.core import BaseConfig, Context, ContractValueError, Throttled
from fleet.core.records import new_token
from tests.worker.procs import ROOT, fleet_env

KEY = "api-key:alpha"


def ctx_of(backend: Backend, automation_type: str) -> Context[BaseConfig]:
    return Context(backend=backend, automation_type=automation_type, config=BaseConfig)


def count_acquires(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record the answer of every ``limits.acquire`` call of ``backend``."""
    answers: list[float] = []
    real: Callable[..., Awaitable[float]] = backend.limits.acquire

    async def spy(*args: Any, **kw: Any) -> float:
        answers.append(await real(*args, **kw))
        return answers[-1]

    monkeypatch.setattr(backend.limits, "acquire", spy)
    return answers


async def place_free(backend: Backend, key: str = KEY) -> bool:
    """True if a cap-1 caller gets a place now (given back at once)."""
    token = new_token()
    wait = await backend.limits.acquire(key, token, interval=None, concurrency=1, hold_seconds=5)
    if wait == 0:
        assert await backend.limits.release(key, token)
    return wait == 0


# ------------------------------------------------------------ arguments


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"key": ""}, "key"),
        ({"key": "x" * 201}, "key"),
        ({"key": "a\nb"}, "key"),
        ({"key": 7}, "key"),
        ({"rate": "fast"}, "rate"),
        ({"rate": "0/s"}, "rate"),
        ({"concurrency": 0}, "concurrency"),
        ({"concurrency": True}, "concurrency"),
        ({"concurrency": 1.5}, "concurrency"),
        ({"rate": None, "concurrency": None}, "rate"),
        ({"timeout": -1}, "timeout"),
        ({"timeout": float("nan")}, "timeout"),
        ({"hold_seconds": 0}, "hold_seconds"),
        ({"hold_seconds": float("inf")}, "hold_seconds"),
    ],
)
def test_invalid_arguments_are_value_errors(args: dict[str, Any], field: str) -> None:
    ctx = ctx_of(MemoryBackend("memory://limit-args"), "t")  # never reaches its store
    kw: dict[str, Any] = {"key": KEY, "concurrency": 1, **args}
    key = kw.pop("key")
    with pytest.raises(ContractValueError) as info:
        ctx.limit(key, **kw)
    assert isinstance(info.value, ValueError)
    assert info.value.field == field


def test_valid_arguments() -> None:
    unused = MemoryBackend("memory://limit-args")
    limit = ctx_of(unused, "t").limit(KEY, rate="3/10s", timeout=0)
    assert limit.rate is not None and limit.rate.interval == pytest.approx(10 / 3)
    assert limit.concurrency is None and limit.timeout == 0.0
    assert ctx_of(unused, "t").limit("k", concurrency=2).rate is None


# ------------------------------------------------------------ waiting and giving up


async def test_waits_for_a_place_then_holds_it(backend: Backend) -> None:
    ctx = ctx_of(backend, "scraper")
    first = await ctx.limit(KEY, concurrency=1).__aenter__()

    async def leave_later() -> None:
        await asyncio.sleep(0.3)
        await first.__aexit__(None, None, None)

    leaving = asyncio.create_task(leave_later())
    t0 = time.monotonic()
    async with ctx.limit(KEY, concurrency=1, timeout=5) as second:
        assert second.held and 0.25 <= second.waited < 3
        assert 0.25 <= time.monotonic() - t0 < 3
        assert not await place_free(backend)
    await leaving
    assert not second.held
    assert await place_free(backend)


async def test_throttled_after_the_timeout(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = ctx_of(backend, "scraper")
    async with ctx.limit(KEY, concurrency=1):
        answers = count_acquires(backend, monkeypatch)
        t0 = time.monotonic()
        with pytest.raises(Throttled) as info:
            async with ctx.limit(KEY, concurrency=1, timeout=0.5):
                pytest.fail("entered a full limiter")
        waited = time.monotonic() - t0
    assert 0 < info.value.retry_after <= 0.1
    assert 0.35 <= waited < 3
    # It slept what the backend said (~0.1 s) between tries: no busy loop.
    assert 3 <= len(answers) <= 8
    assert all(a > 0 for a in answers)
    assert await place_free(backend)


async def test_timeout_zero_tries_once(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = ctx_of(backend, "scraper")
    async with ctx.limit(KEY, concurrency=2, timeout=0), ctx.limit(KEY, concurrency=2, timeout=0):
        answers = count_acquires(backend, monkeypatch)
        with pytest.raises(Throttled) as info:
            await ctx.limit(KEY, concurrency=2, timeout=0).acquire()
        assert len(answers) == 1 and info.value.retry_after == answers[0] > 0


async def test_a_rate_beyond_the_timeout_fails_at_once(backend: Backend) -> None:
    ctx = ctx_of(backend, "scraper")
    async with ctx.limit(KEY, rate="1/m", timeout=0):
        pass
    t0 = time.monotonic()
    with pytest.raises(Throttled) as info:
        async with ctx.limit(KEY, rate="1/m", timeout=5):
            pytest.fail("a second start within the minute")
    assert time.monotonic() - t0 < 1  # the next start is 60 s away: no point waiting 5
    assert 55 < info.value.retry_after <= 60
    assert "api-key:alpha" in str(info.value)


async def test_rate_spaces_the_blocks(backend: Backend) -> None:
    ctx = ctx_of(backend, "scraper")
    t0 = time.monotonic()
    for _ in range(4):
        async with ctx.limit(KEY, rate="10/s", timeout=5):
            pass
    assert time.monotonic() - t0 >= 0.3  # starts at 0, 0.1, 0.2, 0.3 at the earliest


# ------------------------------------------------------------ leaving the block


async def test_released_on_exception(backend: Backend) -> None:
    limit = ctx_of(backend, "scraper").limit(KEY, concurrency=1)
    with pytest.raises(RuntimeError, match="boom"):
        async with limit:
            assert not await place_free(backend)
            raise RuntimeError("boom")
    assert not limit.held
    assert await place_free(backend)


async def test_released_when_the_block_is_cancelled(backend: Backend) -> None:
    entered = asyncio.Event()

    async def call() -> None:
        async with ctx_of(backend, "scraper").limit(KEY, concurrency=1):
            entered.set()
            await asyncio.sleep(30)

    task = asyncio.create_task(call())
    await asyncio.wait_for(entered.wait(), 5)
    assert not await place_free(backend)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await place_free(backend)


async def test_a_waiter_cancelled_takes_no_place(backend: Backend) -> None:
    ctx = ctx_of(backend, "scraper")
    holder = await ctx.limit(KEY, concurrency=1).__aenter__()
    waiter = asyncio.create_task(ctx.limit(KEY, concurrency=1, timeout=10).__aenter__())
    await asyncio.sleep(0.25)  # a few tries in
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await holder.__aexit__(None, None, None)
    assert await place_free(backend)


async def test_the_hold_is_renewed_while_the_block_runs(backend: Backend) -> None:
    ctx = ctx_of(backend, "scraper")
    async with ctx.limit(KEY, concurrency=1, hold_seconds=0.15) as limit:
        await asyncio.sleep(0.4)  # well past hold_seconds
        assert limit.held
        assert not await place_free(backend)
    assert await place_free(backend)


async def test_a_dead_holders_place_frees_after_its_hold(backend: Backend) -> None:
    # A place taken by a worker that died (nobody renews or releases it).
    dead = new_token()
    assert (
        await backend.limits.acquire(KEY, dead, interval=None, concurrency=1, hold_seconds=0.3) == 0
    )
    t0 = time.monotonic()
    async with ctx_of(backend, "scraper").limit(KEY, concurrency=1, timeout=5):
        assert 0.2 <= time.monotonic() - t0 < 3


async def test_a_handle_is_not_reentrant(backend: Backend) -> None:
    limit = ctx_of(backend, "scraper").limit(KEY, concurrency=2)
    async with limit:
        with pytest.raises(ContractValueError, match="already held"):
            await limit.acquire()
    async with limit:  # but may be used again after the block
        assert limit.held


# ------------------------------------------------------------ one quota, fleet-wide


async def test_two_connections_and_two_types_share_one_quota(backend: Backend) -> None:
    other = await open_backend(backend.url)
    try:
        scraper, checker = ctx_of(backend, "scraper"), ctx_of(other, "checker")
        async with scraper.limit(KEY, concurrency=1):
            with pytest.raises(Throttled):
                async with checker.limit(KEY, concurrency=1, timeout=0):
                    pytest.fail("two places in a limiter of one")
            async with checker.limit("another-key", concurrency=1, timeout=0):
                pass  # other keys are other limiters
        async with checker.limit(KEY, concurrency=1, timeout=0):
            pass

        inflight = peak = 0

        async def call(ctx: Context[BaseConfig]) -> None:
            nonlocal inflight, peak
            async with ctx.limit(KEY, concurrency=2, timeout=10):
                inflight += 1
                peak = max(peak, inflight)
                await asyncio.sleep(0.02)
                inflight -= 1

        await asyncio.gather(*(call(scraper if i % 2 else checker) for i in range(10)))
        assert peak == 2
    finally:
        await other.close()


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
async def test_two_processes_share_one_quota(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "redis":
        url: str = request.getfixturevalue("redis_url")
    else:
        url = f"sqlite:///{tmp_path / 'fleet.db'}"
        await (await open_backend(url)).close()  # the schema, before two processes race for it
    outs = [tmp_path / f"calls-{i}.txt" for i in range(2)]
    procs = [
        await asyncio.create_subprocess_exec(
            *[sys.executable, "-m", "tests.core.limit_proc", url, str(out), "8"],
            cwd=ROOT,
            env=fleet_env(),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for out in outs
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert await asyncio.wait_for(proc.stdout.readline(), 20) == b"ready\n"
        for proc in procs:  # both start at once
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            await proc.stdin.drain()
        codes = [await asyncio.wait_for(proc.wait(), 30) for proc in procs]
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert codes == [0, 0]
    calls = sorted(
        tuple(map(float, line.split())) for out in outs for line in out.read_text().splitlines()
    )
    assert len(calls) == 16
    for (_, end), (start, _) in itertools.pairwise(calls):
        assert start >= end  # concurrency=1 across both processes: no two calls overlap
