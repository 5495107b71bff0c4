"""``wt-loop``: a continuous automation that returns, raises or runs until shutdown."""

from __future__ import annotations

import asyncio
from typing import Literal

from fleet.core import BaseConfig, Context, ContinuousAutomation, register


class LoopConfig(BaseConfig):
    mode: Literal["return", "raise", "forever", "stubborn"] = "forever"


@register("wt-loop")
class LoopAutomation(ContinuousAutomation[LoopConfig]):
    Config = LoopConfig

    async def run_slot(self, ctx: Context[LoopConfig]) -> None:
        await ctx.counter(f"wt-loop:starts:{ctx.slot_id}").incr()
        ctx.metrics.incr("starts")
        mode = ctx.config.mode
        if mode == "raise":
            raise ValueError("planned crash")
        if mode == "forever":
            await ctx.shutdown.wait()
        if mode == "stubborn":  # ignores ctx.shutdown: only cancellation stops it
            await asyncio.sleep(3600)

    async def cleanup(self, ctx: Context[LoopConfig]) -> None:
        await ctx.counter(f"wt-loop:cleanups:{ctx.slot_id}").incr()
