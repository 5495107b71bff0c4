"""A local webhook receiver for the tests: a threaded HTTP server that records every
request and answers each one as a script says (a status, or holding the request open)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Seen:
    """One request as received."""

    path: str
    headers: dict[str, str]
    body: bytes
    status: int | None  # what it was answered (None: held, then dropped)


class Receiver:
    """Records requests; ``answer(seen_before_for_this_id)`` decides each status, and
    a status of 0 holds the request until :attr:`release` is set."""

    def __init__(self, answer: Callable[[int], int]) -> None:
        self.answer = answer
        self.seen: list[Seen] = []
        self.held = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                headers = {k.lower(): v for k, v in self.headers.items()}
                with receiver._lock:
                    before = sum(
                        1 for s in receiver.seen if s.headers["webhook-id"] == headers["webhook-id"]
                    )
                    status = receiver.answer(before)
                    receiver.seen.append(Seen(self.path, headers, body, status or None))
                if status == 0:
                    receiver.held.set()
                    receiver.release.wait(60)
                    return  # dropped: the sender is gone by now
                self.send_response(status)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/in"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    def accepted(self) -> list[Seen]:
        """The requests answered with a 2xx."""
        with self._lock:
            return [s for s in self.seen if s.status is not None and 200 <= s.status < 300]

    def of(self, webhook_id: str) -> list[Seen]:
        """Every request of one ``webhook-id``."""
        with self._lock:
            return [s for s in self.seen if s.headers["webhook-id"] == webhook_id]
