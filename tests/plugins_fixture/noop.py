"""``wt-noop``: a batch automation that does nothing (per-task overhead bench)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register


class NoopTask(BaseModel):
    i: int = 0


@register("wt-noop")
class NoopAutomation(BatchAutomation[BaseConfig]):
    Config = BaseConfig
    TaskPayload = NoopTask

    async def run_one(self, task: Task[Any], ctx: Context[BaseConfig]) -> None:
        return None
