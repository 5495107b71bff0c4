"""A plugin only the worker subprocess of the end-to-end test loads (never the
master's process), so the master must rely on the catalog the worker publishes."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, Field

from fleet.core import BaseConfig, BatchAutomation, register
from fleet.core.context import Context
from fleet.core.tasks import Task

E2E = "m-e2e"
#: A job that runs until it is cancelled.
SLOW = 999


class Job(BaseModel):
    n: int = Field(ge=-10, le=1_000)


class Done(BaseModel):
    n: int


class E2EConfig(BaseConfig):
    label: str = "e2e"


@register(E2E)
class Echo(BatchAutomation[E2EConfig]):
    Config = E2EConfig
    TaskPayload = Job
    Output = Done

    async def run_one(self, task: Task[Any], ctx: Context[E2EConfig]) -> None:
        if task.payload.n < 0:
            raise RuntimeError(f"negative job {task.payload.n}")
        if task.payload.n == SLOW:
            await asyncio.sleep(60)  # until cancelled through the API
        await ctx.emit(Done(n=task.payload.n))
