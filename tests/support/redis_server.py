"""A real ``redis-server`` child process on a free port, for tests."""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

from tests.support.waits import until_sync

REDIS_BIN = shutil.which("redis-server")


#: Ports handed out by :func:`free_port`: below Linux's default ephemeral range
#: (32768-60999), so an outgoing connection made meanwhile by any process (a
#: Redis client, a browser) cannot take the port before our server binds it.
PORT_RANGE = (20000, 32000)
#: A cluster node also listens on its port + 10,000 (the cluster bus): its ports are
#: taken from here, so that the bus port stays below the ephemeral range too.
BUS_OFFSET = 10000
CLUSTER_PORT_RANGE = (20000, 32768 - BUS_OFFSET)


def bindable(port: int) -> bool:
    """True if nothing holds ``port`` on 127.0.0.1 now (checked by binding it without
    ``SO_REUSEADDR``, so a port still in TIME_WAIT is passed over too)."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port(*, bus: bool = False) -> int:
    """A port nothing listens on now, for a server that starts in a moment.

    A random one below the ephemeral range; with ``bus``, one whose cluster bus
    port (+10,000) is free and below that range as well.
    """
    low, high = CLUSTER_PORT_RANGE if bus else PORT_RANGE
    for _ in range(200):
        port = random.randrange(low, high)
        if bindable(port) and (not bus or bindable(port + BUS_OFFSET)):
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_pid(port: int) -> int | None:
    """The ``process_id`` of the Redis server answering on ``port`` (None: none answers)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.settimeout(2.0)
            s.sendall(b"INFO server\r\n")
            data = b""
            while b"process_id:" not in data or not data.endswith(b"\r\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    for line in data.decode(errors="replace").splitlines():
        if line.startswith("process_id:"):
            return int(line.split(":", 1)[1])
    return None


def pong(port: int) -> bool:
    """True if the server on ``port`` answers PING with PONG (not LOADING)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.settimeout(2.0)
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """Start/stop/restart one ``redis-server``; with ``aof=True`` data survives restarts.

    Args:
        aof: Enable ``appendonly yes`` with ``appendfsync always`` in ``directory``.
        directory: Data directory (a fresh temp dir if None).
        extra: More ``redis-server`` arguments (e.g. cluster mode).
    """

    def __init__(
        self, *, aof: bool = False, directory: str | None = None, extra: tuple[str, ...] = ()
    ) -> None:
        if REDIS_BIN is None:
            raise RuntimeError("redis-server is not installed")
        self.aof = aof
        self.extra = extra
        self.cluster = "--cluster-enabled" in extra
        self.dir = Path(directory or tempfile.mkdtemp(prefix="fleet-redis-"))
        self.port = free_port(bus=self.cluster)
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = False  # once started, restarts keep the port

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
        args += self.extra
        for attempt in range(5):
            self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if self._wait_until_serving():
                self.started = True
                return
            if self.started or attempt == 4:
                break
            # Someone took the port (or a cluster node's bus port) first: a first start
            # may move to another one, as a node never seen by any other.
            self.port = free_port(bus=self.cluster)
            args[args.index("--port") + 1] = str(self.port)
            if self.cluster:
                self._forget_node()
        raise RuntimeError(
            f"redis-server did not start on port {self.port}; its log ends:\n{self.log_tail()}"
        )

    def _forget_node(self) -> None:
        """Drop the cluster config file a failed first start may have written."""
        extra = list(self.extra)
        name = (
            extra[extra.index("--cluster-config-file") + 1]
            if "--cluster-config-file" in extra
            else "nodes.conf"
        )
        (self.dir / name).unlink(missing_ok=True)

    def log_tail(self, lines: int = 15) -> str:
        """The last lines of the server's log file ("" if it wrote none)."""
        try:
            text = (self.dir / "redis.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _wait_until_serving(self) -> bool:
        """True once our process answers on the port; False if it exited first."""
        proc = self.proc
        assert proc is not None

        def settled() -> str:
            # The pid in the answer tells our server from another one on the port;
            # PING answers PONG only once an AOF is loaded.
            if server_pid(self.port) == proc.pid and pong(self.port):
                return "serving"
            return "exited" if proc.poll() is not None else ""

        try:
            return until_sync(settled, timeout=30, what="redis-server to serve") == "serving"
        except AssertionError:
            proc.kill()
            proc.wait()
            return False

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
