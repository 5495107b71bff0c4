"""A local site of several hosts (one port each) for the crawl tests and bench.

Page ``i`` of host ``h`` links to its children in a tree, back to its parent and to its
host's front page (cycles), and to the same page number on the next host. Each host
may have a robots.txt (its text given per host), a sitemap (``/sitemap.xml``, an index
naming a gzip sitemap of its pages) and answers conditional requests (``ETag`` and
``Last-Modified`` fixed per page: a second visit with the validators gets 304). The
site records every request: the path, when it came, and how many of that host's
requests were in flight, as the site measures them.
"""

from __future__ import annotations

import gzip
import itertools
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Hit:
    host: int
    path: str
    at: float
    in_flight: int
    status: int = 0


@dataclass
class SiteSpec:
    """What the site serves: ``pages`` pages per host, ``hosts`` hosts, each host's
    robots.txt (None: 404), which hosts serve a sitemap, and how long a page takes."""

    hosts: int = 3
    pages: int = 30
    robots: dict[int, str] = field(default_factory=dict)
    sitemap_hosts: frozenset[int] = frozenset()
    #: Pages no link leads to, only the sitemap (per host: their numbers).
    orphans: int = 0
    latency: float = 0.02
    #: Paths that answer 503 the first time they are asked (every host).
    flaky: frozenset[str] = frozenset()
    #: Paths whose page carries 200 KB more (every host).
    big: frozenset[str] = frozenset()


class Site:
    """The running hosts; ``urls[h]`` is host ``h``'s front page URL."""

    def __init__(self, spec: SiteSpec) -> None:
        self.spec = spec
        self.hits: list[Hit] = []
        self.lock = threading.Lock()
        self._in_flight: Counter[int] = Counter()
        self.servers: list[ThreadingHTTPServer] = []
        self.ports: list[int] = []

    # -- the pages --------------------------------------------------------------

    def total(self) -> int:
        return self.spec.pages + self.spec.orphans

    def links(self, h: int, i: int) -> list[str]:
        n = self.spec.pages
        own = [c for c in (2 * i + 1, 2 * i + 2) if c < n] + [i // 2, 0]
        out = [self.path(j) for j in own]
        nxt = (h + 1) % self.spec.hosts
        out.append(f"http://127.0.0.1:{self.ports[nxt]}{self.path(i)}")
        out.append("mailto:someone@example.com")
        out.append(self.path(i) + "#section")  # the same page
        return out

    def hrefs(self, h: int, i: int) -> list[str]:
        """Every href page ``i`` of host ``h`` serves (``i`` -1: a ``/private/`` page,
        whose links are the front page's, without the ``/private/`` one)."""
        out = self.links(h, max(i, 0))
        return [*out, "/private/secret"] if i >= 0 else out

    @staticmethod
    def path(i: int) -> str:
        return "/" if i == 0 else f"/p/{i}"

    def url(self, h: int, i: int = 0) -> str:
        return f"http://127.0.0.1:{self.ports[h]}{self.path(i)}"

    def page_of(self, path: str) -> int | None:
        if path == "/":
            return 0
        if path.startswith("/p/"):
            try:
                i = int(path[3:])
            except ValueError:
                return None
            return i if 0 <= i < self.total() else None
        if path.startswith("/private/"):
            return -1
        return None

    def fetched(self, h: int, status: int = 200) -> Counter[str]:
        """The paths of host ``h`` answered ``status`` (robots.txt left out), counted."""
        with self.lock:
            return Counter(
                x.path
                for x in self.hits
                if x.host == h and x.status == status and x.path != "/robots.txt"
            )

    # -- serving ------------------------------------------------------------------

    def _handler(self, h: int) -> type[BaseHTTPRequestHandler]:
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                with site.lock:
                    site._in_flight[h] += 1
                    hit = Hit(h, self.path, time.monotonic(), site._in_flight[h])
                    site.hits.append(hit)
                try:
                    time.sleep(site.spec.latency)
                    hit.status = self._answer()
                finally:
                    with site.lock:
                        site._in_flight[h] -= 1

            def _answer(self) -> int:
                path = self.path.split("?", 1)[0]
                if path == "/robots.txt":
                    text = site.spec.robots.get(h)
                    if text is None:
                        return self._send(404, b"no robots here", "text/plain")
                    return self._send(200, text.encode(), "text/plain")
                if path == "/sitemap.xml" and h in site.spec.sitemap_hosts:
                    body = (
                        '<?xml version="1.0"?><sitemapindex '
                        'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                        f"<sitemap><loc>{site.url(h)}sitemap-pages.xml.gz</loc></sitemap>"
                        "</sitemapindex>"
                    )
                    return self._send(200, body.encode(), "application/xml")
                if path == "/sitemap-pages.xml.gz" and h in site.spec.sitemap_hosts:
                    locs = "".join(
                        f"<url><loc>{site.url(h, i)}</loc></url>" for i in range(site.total())
                    )
                    body = (
                        '<?xml version="1.0"?><urlset '
                        f'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}</urlset>'
                    )
                    return self._send(200, gzip.compress(body.encode()), "application/gzip")
                if path in site.spec.flaky:
                    with site.lock:
                        first = sum(1 for x in site.hits if x.host == h and x.path == path) == 1
                    if first:
                        return self._send(503, b"try again", "text/plain")
                i = site.page_of(path)
                if i is None:
                    return self._send(404, b"not found", "text/plain")
                etag = f'"h{h}p{i}"'
                if self.headers.get("If-None-Match") == etag:
                    return self._send(304, b"", "text/html", etag=etag)
                hrefs = "".join(f'<a href="{u}">link</a>' for u in site.hrefs(h, i))
                padding = "<!-- padding -->" * 12_800 if path in site.spec.big else ""
                html = (
                    f"<html><head><title>host {h} page {i}</title></head>"
                    f"<body><h1>host {h} page {i}</h1>{hrefs}{padding}</body></html>"
                )
                return self._send(200, html.encode(), "text/html; charset=utf-8", etag=etag)

            def _send(self, status: int, body: bytes, ctype: str, etag: str | None = None) -> int:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                if etag is not None:
                    self.send_header("ETag", etag)
                    self.send_header("Last-Modified", "Mon, 07 Dec 2026 10:00:00 GMT")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if body:
                    self.wfile.write(body)
                return status

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler

    @contextmanager
    def serving(self) -> Iterator[Site]:
        for h in range(self.spec.hosts):
            server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler(h))
            server.daemon_threads = True
            self.servers.append(server)
            self.ports.append(server.server_address[1])
        for server in self.servers:
            threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield self
        finally:
            for server in self.servers:
                server.shutdown()
                server.server_close()

    # -- what the site measured ------------------------------------------------------

    def max_in_flight(self, h: int) -> int:
        with self.lock:
            return max((x.in_flight for x in self.hits if x.host == h), default=0)

    def gaps(self, h: int, *, pages_only: bool = True) -> list[float]:
        """Seconds between the starts of host ``h``'s requests, in order."""
        with self.lock:
            times = sorted(
                x.at
                for x in self.hits
                if x.host == h and not (pages_only and x.path == "/robots.txt")
            )
        return [b - a for a, b in itertools.pairwise(times)]
