"""``tier-fetch``: fetches a URL with ``ctx.http()`` and emits the exit the site saw
(the tier tests: tests/blocks/test_tiers_fleet.py)."""

from __future__ import annotations

from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register


class Fetch(BaseModel):
    url: str


class Fetched(BaseModel):
    url: str
    exit: str
    attempt: int


@register("tier-fetch")
class TierFetch(BatchAutomation[BaseConfig]):
    TaskPayload = Fetch
    Output = Fetched

    async def run_one(self, task: Task[Fetch], ctx: Context[BaseConfig]) -> None:
        async with ctx.http(timeout=10) as http:
            seen = (await http.get(task.payload.url)).json()
        await ctx.emit(Fetched(url=task.payload.url, exit=seen["exit"], attempt=task.attempt))
