"""``priced-pages``: emits a price per page, until the site "changes its markup" (a
page number from 30 on): then the price is None (tests/monitors/test_monitors_fleet.py)."""

from __future__ import annotations

from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register


class Page(BaseModel):
    n: int


class Priced(BaseModel):
    n: int
    price: float | None


@register("priced-pages")
class PricedPages(BatchAutomation[BaseConfig]):
    TaskPayload = Page
    Output = Priced

    async def run_one(self, task: Task[Page], ctx: Context[BaseConfig]) -> None:
        n = task.payload.n
        if n >= 0:  # a negative page emits nothing
            await ctx.emit(Priced(n=n, price=None if n >= 30 else 9.5))
