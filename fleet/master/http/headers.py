"""Response headers every answer of the master carries, and ``OPTIONS``.

* The dashboard's Content-Security-Policy as a header (a ``<meta>`` cannot say
  ``frame-ancestors``): scripts, styles and connections from the master only, and no
  page of the master may be framed by another site.
* ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: no-referrer`` and
  ``X-Frame-Options: DENY`` (for browsers older than ``frame-ancestors``).
* ``OPTIONS`` is answered from the routes (204 with ``Allow``, or 404) instead of
  falling through to the static files. No cross-origin access is granted: there is
  no ``Access-Control-Allow-*``, so browsers refuse other sites' requests.
* W3C trace context past its specification's sizes is dropped from the request
  before anything reads it: a ``traceparent`` longer than the 55 characters of
  version 00, a ``tracestate`` longer than 512 characters or of more than 32
  members (as the recommendation says of an invalid header: ignored, not refused).

The ``Server`` header is not sent (``server_header=False`` where uvicorn is
configured, :mod:`fleet.master.serve`).
"""

from __future__ import annotations

from starlette.routing import Match, Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]
_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")

#: The sizes of W3C trace context (https://www.w3.org/TR/trace-context/): a
#: ``traceparent`` of version 00 has 55 characters; a ``tracestate`` at most 32
#: list members and 512 characters (all its header lines together).
TRACEPARENT_CHARS = 55
TRACESTATE_CHARS = 512
TRACESTATE_MEMBERS = 32


def bounded_trace_context(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]] | None:
    """``headers`` without the trace context past its sizes (see the module), or None
    when nothing needs to go (the common case: no copy)."""
    drop_parent = False
    state_chars = state_members = 0
    for name, value in headers:
        if name == b"traceparent" and len(value.strip()) > TRACEPARENT_CHARS:
            drop_parent = True
        elif name == b"tracestate":
            state_chars += len(value.strip()) + (1 if state_chars else 0)  # lines join with ","
            state_members += value.count(b",") + 1
    drop_state = state_chars > TRACESTATE_CHARS or state_members > TRACESTATE_MEMBERS
    if not (drop_parent or drop_state):
        return None
    dropped = {b"traceparent"} if drop_parent else set()
    if drop_state:
        dropped.add(b"tracestate")
    return [(k, v) for k, v in headers if k not in dropped]


def allowed_methods(app: ASGIApp, scope: Scope) -> list[str]:
    """The methods some route of ``app`` answers at ``scope``'s path."""
    routes = getattr(getattr(app, "router", None), "routes", None) or []
    found: set[str] = set()
    for method in _METHODS:
        probe = {**scope, "method": method}
        for route in routes:
            if isinstance(route, Mount):
                continue  # the static files: asked below, only if no route matched
            match, _ = route.matches(probe)
            if match is Match.FULL:
                found.add(method)
                break
    if not found and not scope.get("path", "").startswith("/api/"):
        probe = {**scope, "method": "GET"}
        if any(isinstance(r, Mount) and r.matches(probe)[0] is Match.FULL for r in routes):
            found.add("GET")
    if "GET" in found:
        found.add("HEAD")
    return [m for m in _METHODS if m in found]


class SecurityHeaders:
    """ASGI middleware (see the module docstring).

    Args:
        app: The wrapped application (the Starlette app whose routes OPTIONS reads
            is ``scope["app"]``).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        bounded = bounded_trace_context(scope.get("headers") or [])
        if bounded is not None:
            scope = {**scope, "headers": bounded}
        if scope.get("method") == "OPTIONS":
            methods = allowed_methods(scope.get("app") or self.app, scope)
            status = 204 if methods else 404
            allow = ", ".join([*methods, "OPTIONS"]) if methods else ""
            headers = [*HEADERS, (b"content-length", b"0")]
            if allow:
                headers.append((b"allow", allow.encode()))
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return

        async def add(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in HEADERS if k not in present]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, add)
