"""Sitemaps: the pages and nested sitemaps one sitemap document names.

Parsing is ultimate-sitemap-parser's (XML url sets and indexes, RSS/Atom feeds and
plain-text lists). Fleet fetches each document itself, through the crawl's own
client (its identity, proxy tier and politeness), and submits a nested sitemap as a
task of the crawl, so an index of a thousand sitemaps is read by the whole fleet.
"""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass

from usp.objects.sitemap import AbstractIndexSitemap, InvalidSitemap
from usp.tree import sitemap_from_str

from fleet.crawl.urls import canonical_or_none

#: The protocol's limit on one sitemap, uncompressed (50 MB); more is not read.
MAX_BYTES = 50 * 1024 * 1024

# The parser logs each line it cannot read at INFO: a crawl counts instead.
logging.getLogger("usp").setLevel(logging.WARNING)


@dataclass(frozen=True)
class Sitemap:
    """What one sitemap document names (canonical URLs, each once)."""

    pages: list[str]
    sitemaps: list[str]


def inflate(body: bytes) -> bytes:
    """A gzip body inflated (a plain one as it is), at most :data:`MAX_BYTES`."""
    if not body.startswith(b"\x1f\x8b"):
        return body[:MAX_BYTES]
    try:
        return zlib.decompressobj(wbits=47).decompress(body, MAX_BYTES)
    except zlib.error:
        return b""


def read(body: bytes) -> Sitemap:
    """The pages and nested sitemaps of a sitemap document (gzip or not)."""
    text = inflate(body).decode("utf-8", errors="replace")
    if not text.strip():
        return Sitemap([], [])
    parsed = sitemap_from_str(text)
    pages = _unique(p.url for p in parsed.all_pages())
    nested: list[str] = []
    if isinstance(parsed, AbstractIndexSitemap):
        nested = _unique(s.url for s in parsed.sub_sitemaps if isinstance(s, InvalidSitemap))
    return Sitemap(pages, nested)


def _unique(urls: object) -> list[str]:
    seen: dict[str, None] = {}
    for url in urls:  # type: ignore[attr-defined]
        c = canonical_or_none(str(url))
        if c is not None:
            seen.setdefault(c, None)
    return list(seen)
