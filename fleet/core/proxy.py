"""``ctx.proxy``: the slot's proxy URL and how to change it.

A proxy comes from the automation's config: ``proxy_url`` (one URL, or several
separated by commas/newlines, used round-robin by slot), or ``proxy_provider``
naming an entry point of group ``fleet.proxy_providers`` that builds URLs.
"""

from __future__ import annotations

import os
from typing import Any, Protocol


class ProxyProvider(Protocol):
    """What a ``fleet.proxy_providers`` entry point returns when called with its config."""

    def url(self, *, session: str, country: str | None) -> str | None:
        """The proxy URL for a sticky ``session`` id and an optional ``country``."""
        ...


class TemplateProvider:
    """Builds URLs from a template with ``{session}`` and ``{country}`` placeholders.

    Config: ``{"template": "http://user-{session}-cc-{country}:pw@host:port",
    "default_country": "us"}``.
    """

    def __init__(self, config: dict[str, Any]) -> None:
        template = config.get("template")
        if not isinstance(template, str) or not template:
            raise ValueError("template proxy provider needs a 'template' string")
        self.template = template
        self.default_country = config.get("default_country") or ""

    def url(self, *, session: str, country: str | None) -> str | None:
        return self.template.format(session=session, country=country or self.default_country)


def split_proxy_urls(value: str | None) -> list[str]:
    """The URLs of a ``proxy_url`` config value (comma or newline separated)."""
    if not value:
        return []
    return [u.strip() for u in value.replace("\n", ",").split(",") if u.strip()]


class ProxyHandle:
    """The slot's proxy: ``url`` now, and ``rotate``/``set_country``/``report_bad``.

    Args:
        urls: Fixed URLs from ``proxy_url`` (rotated through in order).
        provider: A provider building URLs per session and country, or None.
        index: Starting position in ``urls`` (the slot id spreads slots apart).
    """

    def __init__(
        self, urls: list[str] | None = None, provider: ProxyProvider | None = None, index: int = 0
    ) -> None:
        self._urls = list(urls or [])
        self._provider = provider
        self._index = index
        self._country: str | None = None
        self._session = os.urandom(6).hex()
        self.bad: list[tuple[str | None, str]] = []
        self.url: str | None = None
        self._resolve()

    def _resolve(self) -> None:
        if self._provider is not None:
            self.url = self._provider.url(session=self._session, country=self._country)
        elif self._urls:
            self.url = self._urls[self._index % len(self._urls)]
        else:
            self.url = None

    async def rotate(self) -> str | None:
        """Move to a new exit: a new sticky session, or the next fixed URL."""
        self._session = os.urandom(6).hex()
        self._index += 1
        self._resolve()
        return self.url

    async def set_country(self, country: str) -> str | None:
        """Ask the provider for an exit in ``country`` (fixed URLs ignore it)."""
        self._country = country
        self._resolve()
        return self.url

    async def report_bad(self, reason: str = "") -> str | None:
        """Remember the current URL as bad and rotate away from it."""
        self.bad.append((self.url, reason))
        return await self.rotate()
