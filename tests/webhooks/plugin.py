"""``hook-pages``: a task that does nothing, so that a run of them ends; a negative page
fails (tests/webhooks/test_webhooks_fleet.py)."""

from __future__ import annotations

from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register


class Page(BaseModel):
    n: int


@register("hook-pages")
class HookPages(BatchAutomation[BaseConfig]):
    TaskPayload = Page

    async def run_one(self, task: Task[Page], ctx: Context[BaseConfig]) -> None:
        if task.payload.n < 0:
            raise RuntimeError(f"page {task.payload.n} is broken")
