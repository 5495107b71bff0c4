"""The automation of the task record tests (issue 26, 2 and 3): reports progress,
emits ``rows`` outputs, then sleeps ``sleep`` seconds or fails if ``fail``."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, Field

from fleet.core import BaseConfig, BatchAutomation, register
from fleet.core.context import Context
from fleet.core.tasks import Task

RECORDS = "m-records"


class Job(BaseModel):
    rows: int = Field(default=1, ge=0, le=200)
    sleep: float = Field(default=0.0, ge=0, le=60)
    fail: bool = False


class Row(BaseModel):
    i: int


@register(RECORDS)
class Rows(BatchAutomation[BaseConfig]):
    Config = BaseConfig
    TaskPayload = Job
    Output = Row

    async def run_one(self, task: Task[Any], ctx: Context[BaseConfig]) -> None:
        job = task.payload
        for i in range(job.rows):
            await ctx.progress((i + 1) / max(job.rows, 1), f"row {i + 1}/{job.rows}")
            await ctx.emit(Row(i=i))
        if job.sleep:
            await asyncio.sleep(job.sleep)
        if job.fail:
            raise RuntimeError("the job was told to fail")
