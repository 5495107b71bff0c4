"""The auth gate: the first thing every request meets, before any body is read.

* A request without a valid token from a client address that failed authentication
  too often is answered 429 at once (``Retry-After``): guessing tokens costs the
  guesser time, not the master. Other addresses are not affected, and neither is a
  request with a valid token from the same address (a NAT or proxy shared with the
  guesser does not lock out the fleet's operators). The address is the peer's, unless
  the peer is one of ``FLEET_TRUSTED_PROXIES``: then the client that proxy names in
  ``X-Forwarded-For`` (resolved by the server before this gate).
* A request that carries a body (POST, PUT, PATCH, DELETE) under ``/api/v1`` is
  refused with 401 when its token is missing or unknown, and with 403 when the token
  may not do anything a body could be for there (a read token; a scoped token outside
  ``/tasks`` of its own types) — before one byte of the body is read, so nothing
  unauthenticated costs more than its headers. The routes still check every token
  fully; the gate only refuses early what they would refuse anyway.

Failures are counted from the answers: every 401 the app sends for an address.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fleet.master.http.auth import Kind, Principal, TokenTable, bearer_token

API = "/api/v1/"
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass
class FailurePolicy:
    """How many failed authentications an address may make, and for how long it
    is then refused."""

    window_seconds: float = 10.0
    max_failures: int = 20
    #: Addresses remembered at most (the oldest are forgotten first).
    max_addresses: int = 10_000


class FailedAuth:
    """Failed authentications per client address in a sliding window."""

    def __init__(
        self, policy: FailurePolicy | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.policy = policy or FailurePolicy()
        self._clock = clock
        self._seen: OrderedDict[str, deque[float]] = OrderedDict()

    def _window(self, address: str) -> deque[float] | None:
        times = self._seen.get(address)
        if times is None:
            return None
        horizon = self._clock() - self.policy.window_seconds
        while times and times[0] <= horizon:
            times.popleft()
        if not times:
            del self._seen[address]
            return None
        return times

    def blocked_for(self, address: str) -> float:
        """Seconds until ``address`` may try again (0: it may now)."""
        times = self._window(address)
        if times is None or len(times) < self.policy.max_failures:
            return 0.0
        return max(times[0] + self.policy.window_seconds - self._clock(), 0.0)

    def failed(self, address: str) -> None:
        times = self._window(address)
        if times is None:
            times = self._seen[address] = deque(maxlen=self.policy.max_failures)
            while len(self._seen) > self.policy.max_addresses:
                self._seen.popitem(last=False)
        self._seen.move_to_end(address)
        times.append(self._clock())


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def _may_send_body(principal: Principal, path: str) -> bool:
    """Whether any route under ``path`` could accept a body from ``principal``."""
    if principal.kind is Kind.ADMIN:
        return True
    if principal.kind is Kind.READ:
        return False
    # Scoped: only submits to its own types.
    parts = path[len(API) :].split("/")
    return (
        len(parts) >= 3
        and parts[0] == "automations"
        and parts[1] in principal.types
        and parts[2] == "tasks"
    )


async def _answer(send: Send, status: int, detail: str, headers: list[tuple[bytes, bytes]]) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                # The body was not read: the connection cannot carry another request.
                (b"connection", b"close"),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class AuthGate:
    """ASGI middleware (see the module docstring).

    Args:
        app: The wrapped application.
        tokens: Returns the master's token table (read per request: tests swap it).
        failures: The failed-authentication book (one per app).
    """

    def __init__(
        self, app: ASGIApp, tokens: Callable[[], TokenTable], failures: FailedAuth
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.failures = failures

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        guarded = path.startswith(API) or path == "/metrics"
        if not guarded:
            await self.app(scope, receive, send)
            return
        # The peer address, or the client a trusted proxy names (FLEET_TRUSTED_PROXIES,
        # applied by the server before this gate): a forged X-Forwarded-For from
        # anyone else changes nothing.
        client = scope.get("client")
        address = str(client[0]) if client else "?"
        token = bearer_token(_header(scope, b"authorization"))
        principal = self.tokens().identify(token) if token is not None else None
        # The failures are throttled, not the address: a valid token goes through
        # even while others behind the same address keep failing.
        wait = 0.0 if principal is not None else self.failures.blocked_for(address)
        if wait > 0:
            retry = str(max(int(wait + 0.999), 1)).encode()
            await _answer(
                send, 429, "too many failed authentications; retry later",
                [(b"retry-after", retry)],
            )  # fmt: skip
            return
        if scope.get("method") in BODY_METHODS and path.startswith(API):
            if principal is None:
                self.failures.failed(address)
                detail = "missing bearer token" if token is None else "unknown token"
                await _answer(send, 401, detail, [(b"www-authenticate", b"Bearer")])
                return
            if not _may_send_body(principal, path):
                await _answer(send, 403, "this token may not send a request body here", [])
                return

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start" and message.get("status") == 401:
                self.failures.failed(address)
            await send(message)

        await self.app(scope, receive, watch)
