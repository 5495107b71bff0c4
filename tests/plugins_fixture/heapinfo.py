"""``wt-heap``: reports the worker process' garbage collector settings in counters
(``wt-heap:gen0`` += the young generation's threshold, ``wt-heap:frozen`` += 1 if
objects are frozen, ``wt-heap:enabled`` += 1 if the collector runs), so a test can
see what ``fleet worker`` set. A process that imports it (a worker or master loads
its plugins) with ``FLEET_TEST_HEAP_FILE`` set writes ``<threshold> <frozen objects>
<1 if the collector runs, else 0>`` to that file."""

from __future__ import annotations

import gc
import os
from pathlib import Path
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
        gen0, frozen, enabled = gc.get_threshold()[0], gc.get_freeze_count(), gc.isenabled()
        await ctx.counter("wt-heap:gen0").incr(gen0)
        await ctx.counter("wt-heap:enabled").incr(1 if enabled else 0)
        # Last: the test waits for this one, so the two above have landed by then.
        await ctx.counter("wt-heap:frozen").incr(1 if frozen > 0 else 0)


if os.environ.get("FLEET_TEST_HEAP_FILE"):
    Path(os.environ["FLEET_TEST_HEAP_FILE"]).write_text(
        f"{gc.get_threshold()[0]} {gc.get_freeze_count()} {int(gc.isenabled())}",
        encoding="utf-8",
    )
