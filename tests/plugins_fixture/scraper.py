"""The spec's scraper skeleton (batch-automation.md), fetching with httpx."""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register


class MyConfig(BaseConfig):
    api_key: str


class ScrapeTask(BaseModel):
    url: str
    priority: int = 0


class ScrapeResult(BaseModel):
    url: str
    status: int
    body_len: int


async def fetch(url: str, *, api_key: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.get(url, headers={"X-Api-Key": api_key})


@register("scraper")
class Scraper(BatchAutomation[MyConfig]):
    Config = MyConfig
    TaskPayload = ScrapeTask
    Output = ScrapeResult

    async def run_one(self, task: Task[Any], ctx: Context[MyConfig]) -> None:
        resp = await fetch(task.payload.url, api_key=ctx.config.api_key)
        resp.raise_for_status()
        await ctx.emit(
            ScrapeResult(url=task.payload.url, status=resp.status_code, body_len=len(resp.text))
        )
