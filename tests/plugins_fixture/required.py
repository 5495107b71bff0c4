"""``wt-required``: a batch automation whose config has a required field."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register


class KeyConfig(BaseConfig):
    api_key: str


class KeyTask(BaseModel):
    n: int = 0


class KeyOut(BaseModel):
    api_key: str


@register("wt-required")
class RequiredAutomation(BatchAutomation[KeyConfig]):
    Config = KeyConfig
    TaskPayload = KeyTask
    Output = KeyOut

    async def run_one(self, task: Task[Any], ctx: Context[KeyConfig]) -> None:
        await ctx.emit(KeyOut(api_key=ctx.config.api_key))
