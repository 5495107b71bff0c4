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

* bounds on the request headers while they arrive: at most ``max_header_bytes``
  (the request line and the header fields) and ``max_headers`` fields. A request
  past either is answered ``431`` and its connection closed; what it sent is never
  held: the bytes of a head still incomplete are counted as they come in, so the
  parser holds at most the limit and one read (~64 KiB) before it is dropped.

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
#: Bytes of a request's line and header fields (``FLEET_MAX_HEADER_BYTES``).
MAX_HEADER_BYTES = 16 << 10
#: Header fields of one request (``FLEET_MAX_HEADERS``).
MAX_HEADERS = 100
#: Seconds a refused connection is still read (and what it sends dropped) after its
#: 431, so the client reads the answer rather than a reset.
LINGER_SECONDS = 1.0

_503 = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
    b"connection: close\r\ncontent-length: 49\r\n\r\n"
    b'{"detail": "too many connections; retry later"}\r\n'
)
_431_BODY = b'{"detail": "request headers too large"}'
_431 = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
    b"connection: close\r\ncontent-length: "
    + str(len(_431_BODY)).encode()
    + b"\r\n\r\n"
    + _431_BODY
)


def connection_cap(configured: int | None = None) -> int:
    """The most client connections: ``configured``, never above the file limit
    minus :data:`RESERVED_FDS`."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = max(soft - RESERVED_FDS, 16) if soft != resource.RLIM_INFINITY else 1 << 20
    return min(configured or ceiling, ceiling)


def configure(
    *,
    header_seconds: float,
    body_seconds: float,
    max_connections: int | None,
    max_header_bytes: int = MAX_HEADER_BYTES,
    max_headers: int = MAX_HEADERS,
) -> type[GuardedHttpProtocol]:
    """The protocol class for one server, with its bounds."""
    return type(
        "GuardedHttpProtocol",
        (GuardedHttpProtocol,),
        {
            "header_seconds": header_seconds,
            "body_seconds": body_seconds,
            "max_connections": connection_cap(max_connections),
            "max_header_bytes": max_header_bytes,
            "max_headers": max_headers,
        },
    )


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with header and body deadlines, header bounds
    and the cap."""

    #: Set by :func:`configure` from the settings.
    max_connections: int = connection_cap()
    header_seconds: float = HEADER_SECONDS
    body_seconds: float = BODY_SECONDS
    max_header_bytes: int = MAX_HEADER_BYTES
    max_headers: int = MAX_HEADERS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self.waiting_since: float | None = None  # set while its headers are awaited
        self._in_body = False  # the current request's headers are all in
        self._head_read = 0  # bytes read while its headers were incomplete
        self._head_size = 0  # bytes of its line and fields, as parsed
        self._head_fields = 0
        self._refused = False  # answered 431: the rest is dropped

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

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # lingering after a 431: dropped unread
        if self._in_body:
            super().data_received(data)
            return
        self._head_read += len(data)
        super().data_received(data)
        # A head still incomplete past the bound is refused before the next read:
        # the parser never holds more than the bound and one read of it.
        if not self._in_body and self._head_read > self.max_header_bytes:
            self._refuse()

    def on_url(self, url: bytes) -> None:
        if self._refused:
            return
        self._head_size += len(url)
        if self._head_size > self.max_header_bytes:
            self._refuse()
            return
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._refused:
            return
        self._head_fields += 1
        self._head_size += len(name) + len(value) + 4  # ": " and CRLF
        if self._head_fields > self.max_headers or self._head_size > self.max_header_bytes:
            self._refuse()
            return
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        if self._refused:
            return
        self.waiting_since = None
        self._in_body = True
        self._arm(self.body_seconds)
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self._refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if self._refused:
            return
        self._disarm()
        self._in_body = False
        self._head_read = self._head_size = self._head_fields = 0
        super().on_message_complete()

    def _refuse(self) -> None:
        """Answer 431 and close: the request's headers went past a bound. The
        connection is read (and dropped) for ``LINGER_SECONDS`` more, so the client
        gets the answer rather than a reset, then closed."""
        self._refused = True
        self.waiting_since = None
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        transport.write(_431)
        if transport.can_write_eof():
            transport.write_eof()
        self._arm(LINGER_SECONDS)

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
