"""URLs as a crawl sees them: one canonical form per page, and the host a page's
politeness belongs to.

Canonicalisation is w3lib's (Scrapy's): scheme and host lower-cased, the query's
arguments sorted, the fragment dropped, percent-encoding made uniform. Fleet adds the
one thing it leaves: a port that is the scheme's default is dropped, so
``http://a:80/`` and ``http://a/`` are one page.
"""

from __future__ import annotations

import functools
from urllib.parse import urlsplit, urlunsplit

from w3lib.url import canonicalize_url

from fleet.core.errors import ContractValueError

_DEFAULT_PORTS = {"http": 80, "https": 443}
#: The longest URL a crawl takes (longer ones are traps: calendars, session ids).
MAX_URL_LENGTH = 2048


def canonical(url: str) -> str:
    """The canonical form of an absolute http(s) URL (the crawl's ``unique_key``).

    Raises:
        ContractValueError: naming ``url``, for anything that is not an absolute
            http(s) URL with a host, or is longer than :data:`MAX_URL_LENGTH`.
    """
    if not isinstance(url, str) or len(url) > MAX_URL_LENGTH:
        raise ContractValueError(
            f"a crawl URL must be a string of at most {MAX_URL_LENGTH} characters", field="url"
        )
    try:
        parts = urlsplit(canonicalize_url(url.strip()))
        port = parts.port
    except ValueError as e:
        raise ContractValueError(f"{url!r} is not a URL: {e}", field="url") from None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ContractValueError(f"{url!r} is not an absolute http(s) URL with a host", field="url")
    netloc = parts.hostname
    if ":" in netloc:  # an IPv6 address
        netloc = f"[{netloc}]"
    if port is not None and port != _DEFAULT_PORTS[parts.scheme]:
        netloc = f"{netloc}:{port}"
    if parts.username or parts.password:
        raise ContractValueError(f"{url!r} carries credentials: a crawl refuses them", field="url")
    return urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))


@functools.lru_cache(maxsize=8192)
def canonical_or_none(url: str) -> str | None:
    """:func:`canonical`, or None for what is not a crawlable URL (a ``mailto:``, a
    ``javascript:`` link, a malformed href). Cached: a page's links are made canonical
    by ``page.links()`` and again when followed, and a site's menus repeat on every
    page (8,192 URLs: a few MB at most)."""
    try:
        return canonical(url)
    except ContractValueError:
        return None


def host_of(url: str) -> str:
    """A URL's ``host:port``, the port always written (``example.com:443``): the
    group its requests are limited in, and the key of its robots.txt."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = parts.port or _DEFAULT_PORTS.get(parts.scheme, 0)
    return f"{host}:{port}"


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of a URL (where its robots.txt lives)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}"
