"""A real Redis Cluster of three primaries on this machine, for tests and benches."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import redis

from tests.support.redis_server import REDIS_BIN, RedisServer
from tests.support.waits import until_sync

REDIS_CLI = shutil.which("redis-cli")


class ClusterSet:
    """Three ``redis-server --cluster-enabled yes`` nodes joined by
    ``redis-cli --cluster create`` (no replicas), every slot served."""

    def __init__(self, size: int = 3) -> None:
        if REDIS_BIN is None or REDIS_CLI is None:
            raise RuntimeError("redis-server and redis-cli are needed for a cluster")
        self.dir = Path(tempfile.mkdtemp(prefix="fleet-cluster-"))
        self.nodes = [
            RedisServer(
                directory=str(self.dir / f"n{i}"),
                extra=(
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    str(self.dir / f"n{i}" / "nodes.conf"),
                    "--cluster-node-timeout",
                    "5000",
                ),
            )
            for i in range(size)
        ]

    @property
    def url(self) -> str:
        """The ``redis+cluster://`` URL naming every node."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def start(self) -> None:
        for node in self.nodes:
            node.dir.mkdir(parents=True, exist_ok=True)
            node.start()
        subprocess.run(
            [REDIS_CLI or "redis-cli", "--cluster", "create"]
            + [f"127.0.0.1:{n.port}" for n in self.nodes]
            + ["--cluster-replicas", "0", "--cluster-yes"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        until_sync(
            self.serving, timeout=30, interval=0.1, what="the cluster to reach cluster_state:ok"
        )

    def serving(self) -> bool:
        """Every node says ``cluster_state:ok`` and knows every other."""
        for node in self.nodes:
            with redis.Redis(port=node.port, decode_responses=True) as r:
                info = r.execute_command("CLUSTER", "INFO")
                text = info if isinstance(info, str) else str(info)
                if "cluster_state:ok" not in text:
                    return False
                if f"cluster_known_nodes:{len(self.nodes)}" not in text:
                    return False
        return True

    def flush(self) -> None:
        for node in self.nodes:
            with redis.Redis(port=node.port) as r:
                r.flushall()

    def cleanup(self) -> None:
        for node in self.nodes:
            node.stop(kill=True)
        shutil.rmtree(self.dir, ignore_errors=True)
