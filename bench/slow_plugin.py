"""The 50 ms job of ``bench/slow_jobs.py``: ``run_one`` awaits ``SLEEP_MS`` (an HTTP
call's wait); with ``EMIT=1`` it then emits one small output, which its task record
keeps (Fleet's task results: the outputs a task emitted, with their stream ids)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, register

SLEEP = int(os.environ.get("SLEEP_MS", "50")) / 1000
EMIT = os.environ.get("EMIT") == "1"


class Slow(BaseModel):
    i: int = 0


class Done(BaseModel):
    ok: bool
    i: int


@register("slow")
class SlowAutomation(BatchAutomation[BaseConfig]):
    """Waits like an HTTP call; with ``EMIT=1`` emits ``Done(ok=True, i=i)``."""

    Config = BaseConfig
    TaskPayload = Slow
    Output = Done

    async def run_one(self, task: Any, ctx: Any) -> None:
        await asyncio.sleep(SLEEP)
        if EMIT:
            await ctx.emit(Done(ok=True, i=task.payload.i))
