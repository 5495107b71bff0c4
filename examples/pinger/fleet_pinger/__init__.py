"""pinger: a continuous automation that checks a health endpoint and emits the result.

There is no task: each slot loops until ``ctx.shutdown`` is set, pings, emits a
``Ping``, and sleeps in a way that wakes up at once when the slot is stopped.
"""

from __future__ import annotations

import asyncio
import time

import httpx
from pydantic import BaseModel, Field

from fleet.core import BaseConfig, Context, ContinuousAutomation, register


class PingerConfig(BaseConfig):
    """What to ping and how often. Read on every round, so changes apply live."""

    url: str = "http://127.0.0.1:8765/health"
    interval_seconds: float = Field(default=5.0, gt=0)
    request_timeout_seconds: float = Field(default=5.0, gt=0)


class Ping(BaseModel):
    """One health check."""

    url: str
    ok: bool
    status: int | None
    latency_ms: float
    error: str | None = None


async def wait_or_shutdown(shutdown: asyncio.Event, seconds: float) -> bool:
    """Sleep up to ``seconds``; True if ``shutdown`` was set meanwhile (stop now)."""
    try:
        await asyncio.wait_for(shutdown.wait(), timeout=seconds)
    except TimeoutError:
        return False
    return True


async def ping_once(client: httpx.AsyncClient, url: str) -> Ping:
    """GET ``url`` once; network errors become a failed ``Ping``, not an exception."""
    started = time.perf_counter()
    try:
        response = await client.get(url)
    except httpx.HTTPError as exc:
        latency = (time.perf_counter() - started) * 1000
        return Ping(url=url, ok=False, status=None, latency_ms=latency, error=repr(exc))
    latency = (time.perf_counter() - started) * 1000
    return Ping(url=url, ok=response.is_success, status=response.status_code, latency_ms=latency)


@register("pinger")
class Pinger(ContinuousAutomation[PingerConfig]):
    """Pings ``url`` every ``interval_seconds`` until the slot stops."""

    Config = PingerConfig
    Output = Ping

    async def run_slot(self, ctx: Context[PingerConfig]) -> None:
        async with httpx.AsyncClient() as client:
            while not ctx.shutdown.is_set():
                config = ctx.config
                client.timeout = httpx.Timeout(config.request_timeout_seconds)
                ping = await ping_once(client, config.url)
                ctx.metrics.observe("ping_seconds", ping.latency_ms / 1000)
                if not ping.ok:
                    ctx.logger.warning("%s is down: %s", ping.url, ping.error or ping.status)
                await ctx.emit(ping)
                if await wait_or_shutdown(ctx.shutdown, config.interval_seconds):
                    break
