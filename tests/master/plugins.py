"""Automation types the master tests register in-process (and, for the
"master without the plugin" tests, describe only through the catalog)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from fleet.core import BaseConfig, BatchAutomation, ContinuousAutomation, register
from fleet.core.context import Context
from fleet.core.tasks import Task

SCRAPE = "m-scrape"
LOOP = "m-loop"


class Page(BaseModel):
    url: str
    depth: int = Field(default=1, ge=0, le=5)


class ScrapeConfig(BaseConfig):
    user_agent: str = "fleet-test"
    request_timeout_seconds: float = Field(default=10.0, gt=0)


class Line(BaseModel):
    text: str


@register(SCRAPE)
class Scraper(BatchAutomation[ScrapeConfig]):
    Config = ScrapeConfig
    TaskPayload = Page

    async def run_one(self, task: Task[Any], ctx: Context[ScrapeConfig]) -> None:
        return None


class LoopConfig(BaseConfig):
    api_key: str  # required: the type-wide config alone cannot satisfy it


@register(LOOP)
class Looper(ContinuousAutomation[LoopConfig]):
    Config = LoopConfig
    Output = Line

    async def run_slot(self, ctx: Context[LoopConfig]) -> None:
        return None
