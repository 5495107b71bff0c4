"""A batch automation whose browsers come from the plugin engine of
tests/browser/engine_plugin.py (used by tests/browser/test_engines.py in a worker process)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register
from fleet.core.browser import BrowserNeeds


class Page(BaseModel):
    title: str


@register("engine-visit")
class EngineVisit(BatchAutomation[BaseConfig]):
    Config = BaseConfig
    TaskPayload = Page
    Browser = BrowserNeeds(size=1, max_uses=2, engine="fleet-test-engine")

    async def run_one(self, task: Task[Page], ctx: Context[BaseConfig]) -> Any:
        async with ctx.browser.acquire() as page:
            await page.goto(f"data:text/html,<title>{task.payload.title}</title>")
            assert await page.title() == task.payload.title
