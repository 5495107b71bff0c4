"""Automations of the tracing tests: a page that emits a row and submits its links,
and the link task that fails on its first attempt."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Context, Queue, Task, register

PAGE = "wt-traced-page"
LINK = "wt-traced-link"


class Page(BaseModel):
    n: int


class Row(BaseModel):
    n: int


@register(PAGE)
class TracedPage(BatchAutomation[BaseConfig]):
    """Emits one row and submits one link task."""

    Config = BaseConfig
    TaskPayload = Page
    Output = Row

    async def run_one(self, task: Task[Any], ctx: Context[BaseConfig]) -> None:
        await ctx.emit(Row(n=task.payload.n))
        await ctx.submit(Queue[Page](LINK, payload=Page), Page(n=task.payload.n + 1))


@register(LINK)
class TracedLink(BatchAutomation[BaseConfig]):
    """Fails its first attempt, then succeeds."""

    Config = BaseConfig
    TaskPayload = Page

    async def run_one(self, task: Task[Any], ctx: Context[BaseConfig]) -> None:
        if task.attempt == 1:
            raise RuntimeError("link broke")
