"""Local forward proxies for ``fleet dev --demo``: a few distinct exits on one machine.

Each :class:`DemoProxy` listens on loopback and opens its upstream connections *from* its
own source address (127.0.0.2, 127.0.0.3, ...: Linux routes all of 127/8 to the loopback
interface), so the demo site sees one client address per proxy, the way a real site sees
one address per exit. A system that has only 127.0.0.1 (macOS by default) gets proxies
that all connect from it: the demo still runs, its exits are just not distinct.

A proxy forwards absolute-form requests (``GET http://host:port/path``, what an HTTP
client sends a proxy for an ``http://`` URL), one per connection, and tunnels
``CONNECT host:port``. It only reaches loopback targets: nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
from urllib.parse import urlsplit

#: The source addresses of the demo's exits, one proxy each.
SOURCE_ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
#: Longest request head a proxy reads (bytes).
MAX_HEAD = 64 * 1024
#: Longest request body a proxy forwards (bytes).
MAX_BODY = 1024 * 1024
#: Seconds to connect upstream.
CONNECT_TIMEOUT = 10.0
#: Request headers meant for the proxy, or for one connection only: not forwarded.
_HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "upgrade"}
)


def source_available(address: str) -> bool:
    """Whether this machine can open connections from ``address``."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((address, 0))
    except OSError:
        return False
    return True


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address (the only targets a demo proxy reaches)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _answer(status: int, reason: str, text: str = "") -> bytes:
    body = (text or reason).encode() + b"\n"
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy ``reader`` to ``writer`` until end of file, then half-close ``writer``."""
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass


class DemoProxy:
    """One forward proxy whose upstream connections leave from ``source``.

    Args:
        source: The address upstream connections are opened from (None: the system's
            choice, 127.0.0.1 for a loopback target).
        host: The address it listens on.
        port: The port it listens on (0: a free one).

    Attributes:
        requests: Requests and tunnels it has handled.
    """

    def __init__(self, source: str | None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.source = source
        self.host = host
        self.port = port
        self.requests = 0
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        """``http://host:port``: what to give an HTTP client or an identity as its proxy."""
        return f"http://{self.host}:{self.port}"

    @property
    def exit(self) -> str:
        """The client address a loopback site sees through this proxy."""
        return self.source or "127.0.0.1"

    async def start(self) -> None:
        """Listen.

        Raises:
            OSError: The port cannot be bound.
        """
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stop listening and end the connections it serves."""
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        try:
            await self._one(reader, writer)
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass  # a client gone: nothing to tell anyone
        finally:
            if task is not None:
                self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _connect(
        self, host: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        local = (self.source, 0) if self.source else None
        return await asyncio.wait_for(
            asyncio.open_connection(host, port, local_addr=local), CONNECT_TIMEOUT
        )

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            raw = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            writer.write(_answer(431, "Request Header Fields Too Large"))
            return
        except asyncio.IncompleteReadError:
            return
        if len(raw) > MAX_HEAD:
            writer.write(_answer(431, "Request Header Fields Too Large"))
            return
        request_line, *header_lines = raw.decode("latin-1").split("\r\n")
        parts = request_line.split(" ")
        if len(parts) != 3:
            writer.write(_answer(400, "Bad Request", "not an HTTP request line"))
            return
        method, target, version = parts
        self.requests += 1
        if method.upper() == "CONNECT":
            await self._tunnel(target, reader, writer)
            return
        await self._forward(method, target, version, header_lines, reader, writer)

    async def _tunnel(
        self, target: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        host, _, port_text = target.rpartition(":")
        if not host or not port_text.isdigit():
            writer.write(_answer(400, "Bad Request", "CONNECT needs host:port"))
            return
        if not is_loopback(host):
            writer.write(_answer(403, "Forbidden", "the demo's proxies reach loopback only"))
            return
        try:
            up_reader, up_writer = await self._connect(host.strip("[]"), int(port_text))
        except (OSError, TimeoutError) as exc:
            writer.write(_answer(502, "Bad Gateway", f"cannot reach {target}: {exc}"))
            return
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            up_writer.close()

    async def _forward(
        self,
        method: str,
        target: str,
        version: str,
        header_lines: list[str],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        url = urlsplit(target)
        if url.scheme != "http" or not url.hostname:
            writer.write(
                _answer(400, "Bad Request", "send an absolute http:// URL, or CONNECT for https")
            )
            return
        if not is_loopback(url.hostname):
            writer.write(_answer(403, "Forbidden", "the demo's proxies reach loopback only"))
            return
        headers: list[tuple[str, str]] = []
        length = 0
        for line in header_lines:
            if not line:
                continue
            name, _, value = line.partition(":")
            lowered = name.strip().lower()
            if lowered == "transfer-encoding":
                writer.write(_answer(411, "Length Required", "send a Content-Length body"))
                return
            if lowered == "content-length":
                if not value.strip().isdigit() or int(value) > MAX_BODY:
                    writer.write(_answer(413, "Content Too Large"))
                    return
                length = int(value)
            if lowered not in _HOP_HEADERS:
                headers.append((name.strip(), value.strip()))
        body = await reader.readexactly(length) if length else b""
        path = url.path or "/"
        if url.query:
            path += f"?{url.query}"
        try:
            up_reader, up_writer = await self._connect(url.hostname, url.port or 80)
        except (OSError, TimeoutError) as exc:
            writer.write(_answer(502, "Bad Gateway", f"cannot reach {url.netloc}: {exc}"))
            return
        try:
            head = [f"{method} {path} {version}", *(f"{k}: {v}" for k, v in headers)]
            head.append("Connection: close")  # one request per connection, both sides
            up_writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
            await up_writer.drain()
            await _pipe(up_reader, writer)
        finally:
            up_writer.close()


async def start_demo_proxies(
    host: str = "127.0.0.1", first_port: int = 0, sources: tuple[str, ...] = SOURCE_ADDRESSES
) -> list[DemoProxy]:
    """Start one proxy per source address.

    Args:
        host: Where they listen.
        first_port: The first one's port, the next ones' the ports after it (0, or a port
            in use: a free one instead).
        sources: Their source addresses; one this machine cannot use is replaced by
            none (the proxy connects from 127.0.0.1).

    Returns:
        The running proxies, in the order of ``sources``.
    """
    proxies: list[DemoProxy] = []
    try:
        for i, source in enumerate(sources):
            usable = source if source_available(source) else None
            proxy = DemoProxy(usable, host, first_port + i if first_port else 0)
            try:
                await proxy.start()
            except OSError:
                proxy = DemoProxy(usable, host, 0)
                await proxy.start()
            proxies.append(proxy)
    except BaseException:
        await stop_demo_proxies(proxies)
        raise
    return proxies


async def stop_demo_proxies(proxies: list[DemoProxy]) -> None:
    """Stop every proxy of :func:`start_demo_proxies`."""
    await asyncio.gather(*(p.stop() for p in proxies), return_exceptions=True)
