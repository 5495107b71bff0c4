"""``run_local`` without a backend URL: a private memory store per run, dropped at the end."""

from __future__ import annotations

import io
import json
from typing import Any

from pydantic import BaseModel

from fleet.backends.memory import store as memory_store
from fleet.core import BaseConfig, BatchAutomation, Context, Task, register
from fleet.worker.run_local import run_local


class Tick(BaseModel):
    n: int


@register("wt-runcount")
class RunCounter(BatchAutomation[BaseConfig]):
    """Emits how many tasks the store's ``runs`` counter has seen so far."""

    Config = BaseConfig
    TaskPayload = Tick
    Output = Tick

    async def run_one(self, task: Task[Any], ctx: Context[BaseConfig]) -> None:
        await ctx.emit(Tick(n=await ctx.counter("runs").incr()))


def run_stores() -> set[str]:
    return {name for name in memory_store._stores if name.startswith("fleet-run-")}


async def test_runs_in_one_process_share_nothing_and_leave_no_store() -> None:
    before = run_stores()
    for _ in range(2):
        out = io.StringIO()
        code = await run_local(RunCounter, [{"n": 1}], out=out, signals=False)
        assert code == 0
        # A store shared between runs would count on from the first run.
        assert [json.loads(line) for line in out.getvalue().splitlines()] == [{"n": 1}]
        assert run_stores() == before
