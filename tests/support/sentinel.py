"""A real Redis Sentinel deployment on this machine, for tests: a primary, a replica
and three sentinels (quorum 2), each a ``redis-server`` child process on a free port."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import redis

from tests.support.redis_server import REDIS_BIN, RedisServer, free_port
from tests.support.waits import until_sync

SERVICE = "fleet-primary"
#: How long a sentinel waits before it calls a silent primary down (ms).
DOWN_AFTER_MS = 1000


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class SentinelSet:
    """Start, fail over and clean up one primary, one replica and three sentinels."""

    def __init__(self) -> None:
        if REDIS_BIN is None:
            raise RuntimeError("redis-server is not installed")
        self.dir = Path(tempfile.mkdtemp(prefix="fleet-sentinel-"))
        self.primary = RedisServer(aof=True, directory=str(self.dir / "a"))
        self.replica = RedisServer(aof=True, directory=str(self.dir / "b"))
        self.sentinel_ports: list[int] = []
        self.sentinels: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        """The ``redis+sentinel://`` URL of the deployment (db 0)."""
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"

    def start(self) -> None:
        for server in (self.primary, self.replica):
            server.dir.mkdir(parents=True, exist_ok=True)
            server.start()
        with redis.Redis(port=self.replica.port) as r:
            r.execute_command("REPLICAOF", "127.0.0.1", str(self.primary.port))
        self.wait_for(self._replica_in_sync, 30, "the replica to sync")
        for i in range(3):
            port = free_port()
            conf = self.dir / f"sentinel-{i}.conf"
            conf.write_text(
                f"port {port}\n"
                "bind 127.0.0.1\n"
                f"dir {self.dir}\n"
                f"logfile {self.dir / f'sentinel-{i}.log'}\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary.port} 2\n"
                f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {SERVICE} 5000\n"
                f"sentinel parallel-syncs {SERVICE} 1\n"
            )
            proc = subprocess.Popen(
                [REDIS_BIN or "redis-server", str(conf), "--sentinel"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            self.sentinels.append(proc)
            self.sentinel_ports.append(port)
        self.wait_for(self._sentinels_see_all, 30, "the sentinels to find each other")

    def primary_port(self) -> int | None:
        """The port the sentinels now name as the primary (None if none answers)."""
        for port in self.sentinel_ports:
            try:
                with redis.Redis(port=port, socket_timeout=1) as s:
                    addr = s.execute_command("SENTINEL", "get-master-addr-by-name", SERVICE)
            except redis.RedisError:
                continue
            if addr:
                return int(addr[1])
        return None

    def _replica_in_sync(self) -> bool:
        with redis.Redis(port=self.replica.port) as r:
            info = r.info("replication")
        return info.get("master_link_status") == "up"

    def _sentinels_see_all(self) -> bool:
        for port in self.sentinel_ports:
            try:
                with redis.Redis(port=port, socket_timeout=1) as s:
                    master = s.execute_command("SENTINEL", "master", SERVICE)
            except redis.RedisError:
                return False
            # redis-py answers a dict (its SENTINEL MASTER parser)
            fields = {_text(k): _text(v) for k, v in dict(master).items()}
            if int(fields.get("num-other-sentinels", 0)) < 2:
                return False
            if int(fields.get("num-slaves", 0)) < 1:
                return False
        return True

    @staticmethod
    def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
        until_sync(check, timeout=timeout, interval=0.1, what=what, ignoring=(redis.RedisError,))

    def cleanup(self) -> None:
        for proc in self.sentinels:
            proc.kill()
            proc.wait()
        self.primary.stop(kill=True)
        self.replica.stop(kill=True)
        shutil.rmtree(self.dir, ignore_errors=True)
