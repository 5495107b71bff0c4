"""A tiny asyncio HTTP forward proxy and an HTTP target, for the proxy tests.

:class:`ForwardProxy` forwards absolute-form requests (``GET http://host/path``, what
HTTP clients send to a proxy for ``http://`` targets) and tunnels ``CONNECT``. It counts
requests, the requests in flight now and the most ever in flight at once; with
``bad = True`` it answers ``403`` itself (a proxy whose exit the site blocks). With a
user and password it asks for them (``407``) as a real proxy does.

:class:`Target` answers every ``GET`` with a small HTML page after ``delay`` seconds.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
from urllib.parse import urlsplit


async def _read_head(reader: asyncio.StreamReader) -> tuple[str, dict[str, str]] | None:
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        return None
    lines = raw.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    return lines[0], headers


def _response(status: int, reason: str, body: bytes, extra: str = "") -> bytes:
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html\r\n"
        f"Content-Length: {len(body)}\r\n{extra}\r\n"
    )
    return head.encode("latin-1") + body


class _Server:
    def __init__(self) -> None:
        self.server: asyncio.Server | None = None
        self.port = 0
        self._handlers: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # a client gone, or the server closing: nothing to tell anyone
        finally:
            self._handlers.discard(task)
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        raise NotImplementedError


class Target(_Server):
    """An HTTP site: every GET answers 200 with a page naming its path, after ``delay``."""

    def __init__(self, delay: float = 0.0) -> None:
        super().__init__()
        self.delay = delay
        self.hits = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await _read_head(reader)
        if head is None:
            return False
        self.hits += 1
        await asyncio.sleep(self.delay)
        path = head[0].split(" ")[1] if " " in head[0] else "/"
        body = f"<html><title>target {path}</title><body>ok</body></html>".encode()
        writer.write(_response(200, "OK", body))
        await writer.drain()
        return head[1].get("connection", "").lower() != "close"


class ForwardProxy(_Server):
    """An HTTP forward proxy that counts what goes through it (see the module doc)."""

    def __init__(self, name: str, user: str | None = None, password: str | None = None) -> None:
        super().__init__()
        self.name = name
        self.bad = False
        self._auth = None
        if user is not None:
            token = base64.b64encode(f"{user}:{password or ''}".encode()).decode()
            self._auth = f"Basic {token}"
        self.user, self.password = user, password
        #: Start times of the requests served (forwarded or answered 403).
        self.requests: list[float] = []
        self.forbidden: list[float] = []
        self.in_flight = 0
        self.max_in_flight = 0
        #: A header added to every forwarded request (``("X-Exit", name)``): the site
        #: tells the exits apart by it, as a real site does by address.
        self.mark: tuple[str, str] | None = None

    def url(self, *, with_credentials: bool = True) -> str:
        if with_credentials and self.user is not None:
            return f"http://{self.user}:{self.password}@127.0.0.1:{self.port}"
        return f"http://127.0.0.1:{self.port}"

    def reset(self) -> None:
        self.requests.clear()
        self.forbidden.clear()
        self.max_in_flight = self.in_flight

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await _read_head(reader)
        if head is None:
            return False
        line, headers = head
        if self._auth is not None and headers.get("proxy-authorization") != self._auth:
            writer.write(
                _response(
                    407,
                    "Proxy Authentication Required",
                    b"",
                    'Proxy-Authenticate: Basic realm="t"\r\n',
                )
            )
            await writer.drain()
            return True
        method, target, _ = line.split(" ", 2)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.requests.append(time.time())
        try:
            if method == "CONNECT":
                await self._tunnel(target, reader, writer)
                return False
            if self.bad:
                self.forbidden.append(time.time())
                writer.write(_response(403, "Forbidden", b"<html>blocked exit</html>"))
                await writer.drain()
                return True
            return await self._forward(method, target, headers, reader, writer)
        finally:
            self.in_flight -= 1

    async def _forward(
        self,
        method: str,
        target: str,
        headers: dict[str, str],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        parts = urlsplit(target)
        body = b""
        if int(headers.get("content-length", "0") or 0):
            body = await reader.readexactly(int(headers["content-length"]))
        up_r, up_w = await asyncio.open_connection(parts.hostname, parts.port or 80)
        try:
            path = parts.path or "/"
            if parts.query:
                path += f"?{parts.query}"
            kept = {k: v for k, v in headers.items() if not k.startswith("proxy-")}
            kept["connection"] = "close"
            if self.mark is not None:
                kept[self.mark[0].lower()] = self.mark[1]
            lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in kept.items())]
            up_w.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
            await up_w.drain()
            answer = await up_r.read()
        finally:
            up_w.close()
        writer.write(answer)
        await writer.drain()
        return True

    async def _tunnel(
        self, target: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        host, _, port = target.rpartition(":")
        if self.bad:
            self.forbidden.append(time.time())
            writer.write(_response(403, "Forbidden", b""))
            await writer.drain()
            return
        up_r, up_w = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_w), pipe(up_r, writer))
