"""What cf-cookie-harvester and cf-scraper agree on: models and typed references.

No runtime code: both plugins import these, so a rename or a schema change
happens in exactly one place (bump this package's version when it does).
"""

from pydantic import BaseModel

from fleet.core import Pool, Queue, Stream


class CfCookie(BaseModel):
    """A clearance cookie jar, only good with the user agent (and exit) it was issued to."""

    cookies: dict[str, str]
    user_agent: str
    proxy_url: str | None = None
    site: str


class CfCookieTags(BaseModel):
    """What a consumer filters the pool by."""

    site: str
    fresh: bool = True


class HarvestRequest(BaseModel):
    """Ask the harvester for cookies of one site (``host[:port]``)."""

    site: str


class ScrapeTask(BaseModel):
    """One page to fetch."""

    url: str


class ScrapeResult(BaseModel):
    """What the scraper emits per page (``identity``: the identity it went out as)."""

    url: str
    status: int
    body_len: int
    identity: str | None = None


COOKIE_POOL = Pool[CfCookie, CfCookieTags]("cf-cookies", payload=CfCookie, tags=CfCookieTags)
HARVESTER = Queue[HarvestRequest]("cf-cookie-harvester", payload=HarvestRequest)
SCRAPER = Queue[ScrapeTask]("cf-scraper", payload=ScrapeTask)
SCRAPER_OUT = Stream[ScrapeResult]("cf-scraper", payload=ScrapeResult)

__all__ = [
    "COOKIE_POOL",
    "HARVESTER",
    "SCRAPER",
    "SCRAPER_OUT",
    "CfCookie",
    "CfCookieTags",
    "HarvestRequest",
    "ScrapeResult",
    "ScrapeTask",
]
