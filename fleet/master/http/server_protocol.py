"""The master's HTTP protocol: uvicorn's, with bounds on slow and idle clients.

uvicorn bounds idle keep-alive (``timeout_keep_alive``) but not a client that opens
a connection and sends its headers, or its body, one byte a minute: a thousand of
those hold a thousand file descriptors for ever. This protocol adds:

* a deadline for the request headers (``HEADER_SECONDS`` from the connection or from
  the end of the previous request) and one for the body (``BODY_SECONDS`` from the
  end of the headers); a client that misses one is disconnected;
* a cap on open connections, below the process's file limit: a new connection past
  the cap first evicts the oldest connection still waiting for its headers (the
  cheapest one to hold, and the one a slow-client attack is made of); only when no
  such connection exists is it answered ``503`` at once and closed.

So ``/healthz`` keeps answering during a slow-client attack, and nothing a client
that sends nothing does costs more than one descriptor for ``HEADER_SECONDS``.
"""

from __future__ import annotations

import asyncio
import resource
import time
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

#: Seconds a client may take to send its request headers (``FLEET_HEADER_TIMEOUT_SECONDS``).
HEADER_SECONDS = 10.0
#: Seconds a client may take to send its body, once its headers are in
#: (``FLEET_BODY_TIMEOUT_SECONDS``).
BODY_SECONDS = 60.0
#: File descriptors kept free of client connections (backend, logs, files).
RESERVED_FDS = 64

_503 = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
    b"connection: close\r\ncontent-length: 49\r\n\r\n"
    b'{"detail": "too many connections; retry later"}\r\n'
)


def connection_cap(configured: int | None = None) -> int:
    """The most client connections: ``configured``, never above the file limit
    minus :data:`RESERVED_FDS`."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = max(soft - RESERVED_FDS, 16) if soft != resource.RLIM_INFINITY else 1 << 20
    return min(configured or ceiling, ceiling)


def configure(
    *, header_seconds: float, body_seconds: float, max_connections: int | None
) -> type[GuardedHttpProtocol]:
    """The protocol class for one server, with its bounds."""
    return type(
        "GuardedHttpProtocol",
        (GuardedHttpProtocol,),
        {
            "header_seconds": header_seconds,
            "body_seconds": body_seconds,
            "max_connections": connection_cap(max_connections),
        },
    )


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with header and body deadlines and the cap."""

    #: Set by :func:`configure` from the settings.
    max_connections: int = connection_cap()
    header_seconds: float = HEADER_SECONDS
    body_seconds: float = BODY_SECONDS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self.waiting_since: float | None = None  # set while its headers are awaited

    # ------------------------------------------------------------ deadlines
    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def _await_headers(self) -> None:
        self.waiting_since = time.monotonic()
        self._arm(self.header_seconds)

    # ------------------------------------------------------------ protocol
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.max_connections and not self._evict_one():
            transport.write(_503)
            transport.close()
            return
        super().connection_made(transport)
        self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.waiting_since = None
        if self in self.connections or self.transport is not None:
            super().connection_lost(exc)

    def on_headers_complete(self) -> None:
        self.waiting_since = None
        self._arm(self.body_seconds)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # The next request on this keep-alive connection gets its own deadline
        # (uvicorn's keep-alive timeout closes it first if it stays idle).
        if self.transport is not None and not self.transport.is_closing():
            self._await_headers()

    def _evict_one(self) -> bool:
        """Close the connection that has waited longest for its headers; False if
        every connection is past its headers (serving a request)."""
        oldest: GuardedHttpProtocol | None = None
        for conn in self.connections:
            if isinstance(conn, GuardedHttpProtocol) and conn.waiting_since is not None:
                if oldest is None or conn.waiting_since < (oldest.waiting_since or 0.0):
                    oldest = conn
        if oldest is None or oldest.transport is None:
            return False
        oldest.waiting_since = None
        oldest.transport.close()
        self.connections.discard(oldest)
        return True
