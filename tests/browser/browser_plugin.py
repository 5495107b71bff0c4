"""A batch automation that declares a browser: it visits a URL with ctx.browser
and emits the page title (used by tests/browser/test_pool.py)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register
from fleet.core.browser import BrowserNeeds


class Visit(BaseModel):
    url: str


class Title(BaseModel):
    url: str
    title: str
    cookies: int


@register("browser-visit")
class BrowserVisit(BatchAutomation[BaseConfig]):
    Config = BaseConfig
    TaskPayload = Visit
    Output = Title
    Browser = BrowserNeeds(size=1, max_uses=2)

    async def run_one(self, task: Task[Visit], ctx: Context[BaseConfig]) -> Any:
        async with ctx.browser.acquire(proxy=ctx.proxy_url) as page:
            await page.goto(task.payload.url)
            cookies = len(await page.context.cookies())
            await ctx.emit(Title(url=task.payload.url, title=await page.title(), cookies=cookies))
