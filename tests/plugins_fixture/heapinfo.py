"""``wt-heap``: reports the worker process' garbage collector settings in counters
(``wt-heap:gen0`` += the young generation's threshold, ``wt-heap:frozen`` += 1 if
objects are frozen), so a test can see what ``fleet worker`` set."""

from __future__ import annotations

import gc
from typing import Any

from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register


class HeapTask(BaseModel):
    n: int = 0


@register("wt-heap")
class HeapInfo(BatchAutomation[BaseConfig]):
    Config = BaseConfig
    TaskPayload = HeapTask

    async def run_one(self, task: Task[Any], ctx: Context[BaseConfig]) -> None:
        await ctx.counter("wt-heap:gen0").incr(gc.get_threshold()[0])
        await ctx.counter("wt-heap:frozen").incr(1 if gc.get_freeze_count() > 0 else 0)
