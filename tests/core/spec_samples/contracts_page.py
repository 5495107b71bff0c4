"""The code samples of spec/contracts.md, as written there (plus stubs)."""
# ruff: noqa
from __future__ import annotations

from pydantic import BaseModel
from fleet.core import BaseConfig, BatchAutomation, Pool, Queue, Stream
from fleet.core.browser import BrowserNeeds


class CfCookie(BaseModel):
    cookies: dict[str, str]
    user_agent: str
    proxy_url: str | None
    site: str

class CfCookieTags(BaseModel):
    site: str
    fresh: bool = True

class HarvestRequest(BaseModel):
    site: str

class ScrapeResult(BaseModel):
    url: str
    status: int
    body_len: int

COOKIE_POOL = Pool[CfCookie, CfCookieTags]("cf-cookies", payload=CfCookie, tags=CfCookieTags)
HARVESTER = Queue[HarvestRequest]("cf-cookie-harvester", payload=HarvestRequest)
SCRAPER_OUT = Stream[ScrapeResult]("cf-scraper", payload=ScrapeResult)


class HarvesterConfig(BaseConfig):
    pass


class CookieHarvester(BatchAutomation[HarvesterConfig]):
    TaskPayload = HarvestRequest
    Pools = {
        "cookies": Pool[CfCookie, CfCookieTags](
            "cf-cookies", payload=CfCookie, tags=CfCookieTags,
        ),
    }


class GoogleConfig(BaseConfig):
    pass


class SerpQuery(BaseModel):
    q: str


class SerpResult(BaseModel):
    q: str
    links: list[str]


class GoogleSerpAutomation(BatchAutomation[GoogleConfig]):
    TaskPayload = SerpQuery
    Output = SerpResult
    Browser = BrowserNeeds(size=4, max_uses=1, engine="cloak")

    async def run_one(self, task, ctx):
        async with ctx.browser.acquire(proxy=ctx.proxy_url) as page:
            ...
