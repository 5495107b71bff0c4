"""Serve an ASGI app with uvicorn inside a running event loop.

``fleet dev`` and the tests run the demo site next to other work in one loop, and
own the process's signals themselves, so uvicorn must not install its handlers.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from typing import Any

import uvicorn


class _EmbeddedServer(uvicorn.Server):
    """A uvicorn server that leaves SIGINT/SIGTERM to its owner."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``port=0``: a free port).

    Raises:
        OSError: If the address is in use or cannot be bound.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


class RunningServer:
    """An app being served in the current loop; :meth:`stop` shuts it down.

    Attributes:
        host: The address it listens on.
        port: The actual port (useful when 0 was asked for).
    """

    def __init__(self, server: uvicorn.Server, task: asyncio.Task[None], sock: socket.socket):
        self._server = server
        self._task = task
        self._sock = sock
        self.host, self.port = sock.getsockname()[:2]

    @property
    def url(self) -> str:
        """``http://host:port``."""
        return f"http://{self.host}:{self.port}"

    async def stop(self) -> None:
        """Ask the server to exit and wait for it (open connections are closed)."""
        self._server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._sock.close()


async def start_server(app: Any, host: str = "127.0.0.1", port: int = 0) -> RunningServer:
    """Start serving ``app`` in this loop and return once it accepts connections.

    Args:
        app: An ASGI application.
        host: Address to listen on (loopback by default: nothing leaves the machine).
        port: Port to listen on; 0 picks a free one.

    Returns:
        The running server.

    Raises:
        OSError: If the port cannot be bound.
        RuntimeError: If the server stopped before it started.
    """
    sock = bind_socket(host, port)
    config = uvicorn.Config(
        app,
        log_config=None,
        access_log=False,
        lifespan="off",
        ws="none",
        # The app sees the socket's peer as the client: an X-Forwarded-For header from
        # a loopback client must not pass for another address (the demo site binds its
        # cookies to the client address).
        proxy_headers=False,
        timeout_graceful_shutdown=2,
    )
    server = _EmbeddedServer(config)
    task = asyncio.create_task(server.serve(sockets=[sock]), name=f"uvicorn:{port}")
    while not server.started:
        if task.done():
            sock.close()
            task.result()
            raise RuntimeError("server exited before it started")
        await asyncio.sleep(0.01)
    return RunningServer(server, task, sock)
