"""What a recrawl keeps of each page: its validators (``ETag``, ``Last-Modified``)
and its links, so a 304 costs one conditional request and still leads on.

One KV value per page, under a 16-byte hash of its canonical URL, for the crawler's
``recrawl_ttl_seconds``: bounded per page (at most :data:`MAX_LINKS` links, packed with
zlib) and forgotten when its TTL ends. ``bench/crawl_bytes.py`` measures the bytes it
costs per URL on Redis.
"""

from __future__ import annotations

import base64
import hashlib
import zlib
from dataclasses import dataclass

from fleet.core.handles import KV

#: The KV namespace prefix (``fleet-crawl-pages:<type>``).
NAMESPACE = "fleet-crawl-pages"
#: The most links kept for a page (a 304 submits these).
MAX_LINKS = 1000


@dataclass(frozen=True)
class Kept:
    """One page's validators and links."""

    etag: str | None
    last_modified: str | None
    links: list[str]

    def headers(self) -> dict[str, str]:
        """The conditional request's headers."""
        out = {}
        if self.etag:
            out["if-none-match"] = self.etag
        if self.last_modified:
            out["if-modified-since"] = self.last_modified
        return out


def key_of(url: str) -> str:
    """The page's key: 16 bytes of its canonical URL's SHA-256, base64 (22 chars)."""
    digest = hashlib.sha256(url.encode()).digest()[:16]
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def pack(links: list[str]) -> str:
    if not links:
        return ""
    raw = "\n".join(links[:MAX_LINKS]).encode()
    return base64.b64encode(zlib.compress(raw, 6)).decode()


def unpack(text: str) -> list[str]:
    if not text:
        return []
    try:
        raw = zlib.decompressobj().decompress(base64.b64decode(text), 4 * 1024 * 1024)
    except (ValueError, zlib.error):
        return []
    return [line for line in raw.decode(errors="replace").split("\n") if line]


class Recrawl:
    """The pages of one crawler type a recrawl knows."""

    def __init__(self, kv: KV, ttl_seconds: float) -> None:
        self._kv = kv
        self._ttl = ttl_seconds

    async def get(self, url: str) -> Kept | None:
        found = await self._kv.get(key_of(url))
        if not isinstance(found, dict):
            return None
        return Kept(found.get("e"), found.get("m"), unpack(str(found.get("l", ""))))

    async def keep(
        self, url: str, etag: str | None, last_modified: str | None, links: list[str]
    ) -> None:
        """Keep a fetched page's validators and links (nothing without a validator:
        such a page cannot answer 304)."""
        if not etag and not last_modified:
            return
        value: dict[str, str] = {"l": pack(links)}
        if etag:
            value["e"] = etag[:512]
        if last_modified:
            value["m"] = last_modified[:64]
        await self._kv.set(key_of(url), value, ttl_seconds=self._ttl)
