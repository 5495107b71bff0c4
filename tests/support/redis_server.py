"""A real ``redis-server`` child process on a free port, for tests."""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

REDIS_BIN = shutil.which("redis-server")


#: Ports handed out by :func:`free_port`: below Linux's default ephemeral range
#: (32768-60999), so an outgoing connection made meanwhile by any process (a
#: Redis client, a browser) cannot take the port before our server binds it.
PORT_RANGE = (20000, 32000)


def free_port() -> int:
    """A port nothing listens on now, for a server that starts in a moment.

    A random one below the ephemeral range, checked by binding it (without
    ``SO_REUSEADDR``, so a port still in TIME_WAIT is passed over too).
    """
    for _ in range(200):
        port = random.randrange(*PORT_RANGE)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """Start/stop/restart one ``redis-server``; with ``aof=True`` data survives restarts.

    Args:
        aof: Enable ``appendonly yes`` with ``appendfsync always`` in ``directory``.
        directory: Data directory (a fresh temp dir if None).
    """

    def __init__(self, *, aof: bool = False, directory: str | None = None) -> None:
        if REDIS_BIN is None:
            raise RuntimeError("redis-server is not installed")
        self.aof = aof
        self.dir = Path(directory or tempfile.mkdtemp(prefix="fleet-redis-"))
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = [
            REDIS_BIN or "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.dir),
            "--save",
            "",
            "--daemonize",
            "no",
            "--logfile",
            str(self.dir / "redis.log"),
        ]
        if self.aof:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            args += ["--appendonly", "no"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self, *, kill: bool = False) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        """Stop (flushing AOF) and start again on the same port and directory."""
        self.stop()
        self.start()

    def cleanup(self) -> None:
        self.stop(kill=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def require_redis() -> bool:
    """True if Redis tests must fail rather than skip when redis-server is missing."""
    return os.environ.get("FLEET_TEST_REQUIRE_REDIS") == "1"
