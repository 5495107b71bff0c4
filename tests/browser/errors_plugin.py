"""The automations of the error-group tests (tests/browser/test_errors_fleet.py), loaded
with ``--plugin``: each fetches the page its task names and then fails with the page's
URL in the message — ``err-http`` through ``ctx.http()``, ``err-render`` in a tab of
Chromium — so every task's message differs and all of them are one failure."""

from __future__ import annotations

from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register
from fleet.core.browser import BrowserNeeds
from tests.browser.stack import CHROMIUM, CHROMIUM_ARGS


class PageTask(BaseModel):
    url: str


class PriceMissing(Exception):
    """The page has no price (the site changed its markup)."""


@register("err-http")
class HttpPrices(BatchAutomation[BaseConfig]):
    TaskPayload = PageTask

    async def run_one(self, task: Task[PageTask], ctx: Context[BaseConfig]) -> None:
        async with ctx.http() as client:
            r = await client.get(task.payload.url)
        if 'class="price"' not in r.text:
            raise PriceMissing(f"no price on {task.payload.url} (HTTP {r.status_code})")


@register("err-render")
class RenderedPrices(BatchAutomation[BaseConfig]):
    TaskPayload = PageTask
    Browser = BrowserNeeds(size=1, executable_path=CHROMIUM, launch_args=tuple(CHROMIUM_ARGS))

    async def run_one(self, task: Task[PageTask], ctx: Context[BaseConfig]) -> None:
        async with ctx.browser.acquire() as page:
            await page.goto(task.payload.url)
            if await page.locator(".price").count() == 0:
                raise PriceMissing(f"no price rendered on {page.url}")
