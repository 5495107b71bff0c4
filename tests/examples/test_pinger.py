"""The continuous pinger: emits until ``ctx.shutdown``, and stops at once when it is set."""

from __future__ import annotations

import asyncio
import time

from fleet_pinger import Ping, Pinger, wait_or_shutdown

from fleet.core import Stream
from fleet.dev.serve import bind_socket
from tests.examples.conftest import DemoSite, MakeCtx, eventually

PINGS = Stream[Ping]("pinger", payload=Ping)


async def test_wait_or_shutdown_returns_early_when_shutdown_is_set() -> None:
    event = asyncio.Event()
    assert await wait_or_shutdown(event, 0.01) is False
    asyncio.get_running_loop().call_later(0.05, event.set)
    started = time.perf_counter()
    assert await wait_or_shutdown(event, 30) is True
    assert time.perf_counter() - started < 1


async def test_pinger_emits_until_shutdown(demo_site: DemoSite, make_ctx: MakeCtx) -> None:
    ctx = make_ctx(Pinger, url=f"{demo_site.url}/health", interval_seconds=0.05)
    slot = asyncio.create_task(Pinger().run_slot(ctx))
    stream = ctx.stream(PINGS)

    async def three() -> bool:
        return await stream.length() >= 3

    assert await eventually(three)

    ctx.shutdown.set()
    await asyncio.wait_for(slot, 10)  # returns, without being cancelled
    count = await stream.length()
    assert count >= 3
    pings = await stream.peek(n=count)
    assert all(p.payload.ok and p.payload.status == 200 for p in pings)
    assert all(p.payload.url == f"{demo_site.url}/health" for p in pings)
    await asyncio.sleep(0.15)
    assert await stream.length() == count  # nothing after shutdown


async def test_pinger_reports_a_down_site_as_a_failed_ping(make_ctx: MakeCtx) -> None:
    sock = bind_socket("127.0.0.1", 0)  # bound but never listening: connection refused
    port = sock.getsockname()[1]
    ctx = make_ctx(Pinger, url=f"http://127.0.0.1:{port}/health", interval_seconds=30)
    slot = asyncio.create_task(Pinger().run_slot(ctx))
    try:
        stream = ctx.stream(PINGS)

        async def one() -> bool:
            return await stream.length() >= 1

        assert await eventually(one)
        [ping] = await stream.peek()
        assert not ping.payload.ok and ping.payload.status is None and ping.payload.error
    finally:
        ctx.shutdown.set()
        await asyncio.wait_for(slot, 10)  # not after the 30 s interval
        sock.close()
