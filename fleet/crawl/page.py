"""What ``Crawler.parse`` reads and yields: a fetched :class:`Page` and :class:`Link`s."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin

from fleet.crawl.urls import canonical_or_none

#: Tags whose attribute is a link a crawl may follow.
_LINK_ATTRS = {"a": "href", "area": "href", "link": None, "iframe": "src", "frame": "src"}


@dataclass(frozen=True)
class Link:
    """A URL for the crawl to visit (absolute, or relative to the page that yields it).

    ``parse`` yields it; Fleet canonicalises it, applies the crawler's scope and
    submits it into the crawl's run once (its canonical URL is the ``unique_key``).
    """

    url: str


class _Hrefs(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.base: str | None = None
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "base" and self.base is None:
            self.base = dict(attrs).get("href")
            return
        if tag not in _LINK_ATTRS:
            return
        a = dict(attrs)
        if tag == "link":
            # <link rel="next"> and <link rel="alternate"> lead to pages; a stylesheet does not.
            rel = (a.get("rel") or "").lower().split()
            if not {"next", "prev", "alternate"} & set(rel):
                return
            value = a.get("href")
        else:
            value = a.get(_LINK_ATTRS[tag] or "href")
        if value and not (a.get("rel") or "").lower().count("nofollow"):
            self.hrefs.append(value.strip())


@dataclass
class Page:
    """A fetched page.

    Attributes:
        url: The canonical URL the page was fetched from (after redirects).
        status: The HTTP status.
        headers: The response's headers, names lower-cased.
        text: The body as text (decoded as the response says).
        depth: Links from a seed (a seed is 0).
        browser: The open browser page when the crawler renders pages
            (``render = True``), else None.
    """

    url: str
    status: int
    headers: dict[str, str]
    text: str
    depth: int = 0
    browser: Any = None
    _links: list[str] | None = field(default=None, repr=False)

    def links(self) -> list[str]:
        """Every followable link of the page (``a``/``area`` hrefs, frames, ``link
        rel=next|prev|alternate``), absolute and canonical, in page order, each once;
        ``rel=nofollow`` links and non-http(s) ones are left out."""
        if self._links is None:
            found = _Hrefs()
            content_type = self.headers.get("content-type", "text/html")
            if "html" in content_type or "xml" in content_type:
                try:
                    found.feed(self.text)
                    found.close()
                except Exception:  # a broken page yields the links read so far
                    pass
            base = urljoin(self.url, found.base) if found.base else self.url
            seen: dict[str, None] = {}
            for href in found.hrefs:
                url = canonical_or_none(urljoin(base, href))
                if url is not None:
                    seen.setdefault(url, None)
            self._links = list(seen)
        return list(self._links)
