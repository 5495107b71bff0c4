"""One delivery attempt (``fleet.webhooks.automation.post``) against local servers: a 2xx
delivers; a redirect is a failure and is not followed; an error answer is kept short;
no answer within the read timeout, or no server, is a failure named by its kind; the
request carries the Standard Webhooks headers and exactly the event's body."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from fleet.core.webhooks import Hook
from fleet.webhooks import automation
from fleet.webhooks.automation import post
from fleet.webhooks.events import webhook_test_event
from fleet.webhooks.signing import new_secret, verify
from tests.support.redis_server import free_port

SEEN: list[tuple[str, dict[str, str], bytes]] = []


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        SEEN.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        if self.path == "/slow":
            threading.Event().wait(3)
            return
        if self.path == "/moved":
            self.send_response(302)
            self.send_header("location", "/elsewhere")
            self.send_header("content-length", "0")
            self.end_headers()
            return
        status, text = (500, b"x" * 100_000) if self.path == "/broken" else (200, b"thanks")
        self.send_response(status)
        self.send_header("content-length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    SEEN.clear()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def hook(url: str) -> Hook:
    return Hook("wh_1", url, ("run.completed",), new_secret(), 1.0)


async def test_a_2xx_delivers_with_the_signed_headers(server: str) -> None:
    h, event = hook(f"{server}/in?x=1"), webhook_test_event("wh_1")
    assert await post(h, event) == (200, None)
    ((path, headers, body),) = SEEN
    assert path == "/in?x=1" and body == event.body()
    assert headers["webhook-id"] == event.id and headers["content-type"] == "application/json"
    ts = int(headers["webhook-timestamp"])
    assert verify(h.secret, event.id, ts, body, headers["webhook-signature"])


async def test_a_redirect_fails_and_is_not_followed(server: str) -> None:
    assert await post(hook(f"{server}/moved"), webhook_test_event("wh_1")) == (302, "HTTP 302")
    assert [p for p, _, _ in SEEN] == ["/moved"]


async def test_an_error_answer_is_kept_short(server: str) -> None:
    status, error = await post(hook(f"{server}/broken"), webhook_test_event("wh_1"))
    assert status == 500 and error is not None
    assert error.startswith("HTTP 500: xxx") and len(error) <= 320


async def test_no_answer_and_no_server_are_failures(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(automation, "READ_SECONDS", 0.5)
    status, error = await post(hook(f"{server}/slow"), webhook_test_event("wh_1"))
    assert status is None and error is not None and error.startswith("ReadTimeout")
    status, error = await post(hook(f"http://127.0.0.1:{free_port()}/"), webhook_test_event("wh_1"))
    assert status is None and error is not None and error.startswith("ConnectError")
