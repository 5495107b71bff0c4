"""``CrawlConfig``: the config of a crawler's type."""

from __future__ import annotations

from pydantic import Field, field_validator

from fleet.core.config import BaseConfig
from fleet.core.flow import parse_rate


class CrawlConfig(BaseConfig):
    """A crawler's config: ``BaseConfig`` plus its politeness and its stores.

    Args:
        per_host_concurrency: At most this many requests in flight to one host
            (``host:port``), across every worker (None: no cap). Fleet-wide: the
            type's groups are its hosts, and this is their ``group_concurrency``.
        per_host_rate: At most this many requests started per period to one host,
            fleet-wide (``"1/s"``, ``"30/m"``; None: no rate). A host's
            ``Crawl-delay`` tightens it for that host.
        robots_ttl_seconds: How long a host's robots.txt is kept before the next
            request of the fleet fetches it again.
        recrawl_ttl_seconds: How long a page's ``ETag``/``Last-Modified`` (and
            links) are kept for a recrawl.
        max_page_bytes: A body larger than this is not read (counted in
            ``too_large``).
        request_timeout_seconds: Time limit of one page's request.
    """

    slots: int = Field(default=8, ge=0, le=10_000)
    per_host_concurrency: int | None = Field(default=2, ge=1)
    per_host_rate: str | None = "1/s"
    robots_ttl_seconds: float = Field(default=86400.0, gt=0, le=366 * 86400)
    recrawl_ttl_seconds: float = Field(default=30 * 86400.0, gt=0, le=366 * 86400)
    max_page_bytes: int = Field(default=10 * 1024 * 1024, ge=1024)
    request_timeout_seconds: float = Field(default=30.0, gt=0, le=3600)
    # A crawler's groups are its hosts, limited by per_host_*: two names for one limit
    # would disagree, so these take nothing but null (the schema says so: a PATCH of
    # them answers 422 before anything is stored).
    group_concurrency: None = Field(
        default=None, description="a crawler's groups are its hosts: set per_host_concurrency"
    )
    group_rate: None = Field(
        default=None, description="a crawler's groups are its hosts: set per_host_rate"
    )

    @field_validator("per_host_rate")
    @classmethod
    def _check_per_host_rate(cls, value: str | None) -> str | None:
        return None if value is None else parse_rate(value).text

    def group_limits(self) -> tuple[int | None, str | None]:
        return self.per_host_concurrency, self.per_host_rate
