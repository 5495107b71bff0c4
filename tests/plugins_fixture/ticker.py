"""``wt-ticker``: a continuous automation that touches the backend ten times a
second, so a backend outage makes its ``run_slot`` raise ``BackendUnavailable``."""

from __future__ import annotations

import asyncio

from fleet.core import BaseConfig, Context, ContinuousAutomation, register


class TickerConfig(BaseConfig):
    period: float = 0.1


@register("wt-ticker")
class TickerAutomation(ContinuousAutomation[TickerConfig]):
    Config = TickerConfig

    async def run_slot(self, ctx: Context[TickerConfig]) -> None:
        ticks = ctx.counter(f"wt-ticker:ticks:{ctx.slot_id}")
        while not ctx.shutdown.is_set():
            await ticks.incr()
            await asyncio.sleep(ctx.config.period)

    async def cleanup(self, ctx: Context[TickerConfig]) -> None:
        await ctx.counter("wt-ticker:cleanups").incr()
