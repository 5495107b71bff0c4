"""A second automation type for the dashboard's browser tests: a worker started with
this plugin and :mod:`tests.browser.dash_plugin` runs two types in one process (as
``fleet dev`` does), so it registers twice under one worker id."""

from __future__ import annotations

from pydantic import BaseModel, Field

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register

TYPE = "dash-pair"


class PairTask(BaseModel):
    """What to echo."""

    text: str = Field(min_length=1, max_length=100)


class PairOut(BaseModel):
    """The echoed text."""

    text: str


@register(TYPE)
class DashPair(BatchAutomation[BaseConfig]):
    """Echo a text to the stream."""

    Config = BaseConfig
    TaskPayload = PairTask
    Output = PairOut

    async def run_one(self, task: Task[PairTask], ctx: Context[BaseConfig]) -> None:
        await ctx.emit(PairOut(text=task.payload.text))
