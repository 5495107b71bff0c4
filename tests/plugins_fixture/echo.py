"""``wt-echo``: a batch automation whose payload scripts its behaviour.

Every run increments the counter ``wt-echo:runs:<task id>`` when it starts, so a
test can see exactly how often a task ran, on any backend and any process.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register


class EchoConfig(BaseConfig):
    label: str = "a"


class EchoTask(BaseModel):
    n: int
    fail_times: int = 0
    sleep: float = 0.0
    sleep_first: float = 0.0  # sleep only on the first attempt


class Echo(BaseModel):
    n: int
    attempt: int
    slot: int
    label: str
    proxy: str | None
    worker: str


@register("wt-echo")
class EchoAutomation(BatchAutomation[EchoConfig]):
    Config = EchoConfig
    TaskPayload = EchoTask
    Output = Echo

    async def run_one(self, task: Task[Any], ctx: Context[EchoConfig]) -> None:
        await ctx.counter(f"wt-echo:runs:{task.id}").incr()
        p: EchoTask = task.payload
        if p.sleep_first and task.attempt == 1:
            await asyncio.sleep(p.sleep_first)
        if p.sleep:
            await asyncio.sleep(p.sleep)
        if task.attempt <= p.fail_times:
            raise RuntimeError(f"planned failure {task.attempt}")
        await ctx.emit(
            Echo(
                n=p.n,
                attempt=task.attempt,
                slot=ctx.slot_id,
                label=ctx.config.label,
                proxy=ctx.proxy_url,
                worker=ctx.worker_id,
            )
        )

    async def cleanup(self, ctx: Context[EchoConfig]) -> None:
        await ctx.counter("wt-echo:cleanups").incr()
