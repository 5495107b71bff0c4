"""Local sites for the tests: a threaded HTTP server on a free loopback port, and the
"visits" site the identity tests read (it echoes what it saw and counts visits in a
cookie), so no test reaches outside this machine."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` served on 127.0.0.1 (a free port) while the block runs; its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(BaseHTTPRequestHandler):
    """A handler that logs nothing (a test's output stays the test's) and answers with
    :meth:`answer`."""

    def answer(
        self,
        status: int,
        body: bytes,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    ) -> None:
        """One whole answer: the status, the headers (a repeated name kept), the
        ``Content-Length`` and the body."""
        pairs = headers.items() if isinstance(headers, Mapping) else headers
        self.send_response(status)
        for name, value in pairs:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def visits_of(cookie: str) -> int:
    """The ``visits`` count a ``Cookie`` header carries (0 without one)."""
    for part in cookie.split(";"):
        name, _, value = part.strip().partition("=")
        if name == "visits":
            return int(value)
    return 0


class VisitsSite(QuietHandler):
    """Answers ``{exit, ua, cookie}``: the ``X-Exit`` a test proxy marks its requests
    with, the User-Agent and the cookie it got; sets ``visits`` one above the cookie's."""

    def do_GET(self) -> None:
        cookie = self.headers.get("Cookie", "")
        seen = {
            "exit": self.headers.get("X-Exit", ""),
            "ua": self.headers.get("User-Agent", ""),
            "cookie": cookie,
        }
        headers = {
            "Content-Type": "application/json",
            "Set-Cookie": f"visits={visits_of(cookie) + 1}; Path=/",
        }
        self.answer(200, json.dumps(seen).encode(), headers)
