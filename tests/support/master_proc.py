"""A real ``fleet master`` child process whose output goes to a log file."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx

from fleet.core.catalog import CatalogEntry
from tests.support.redis_server import free_port
from tests.support.waits import until
from tests.worker.procs import ROOT, fleet_env


def bare_entry(automation_type: str) -> CatalogEntry:
    """A catalog entry of a queue type whose payload is any object: what a master
    process needs to take tasks of a type no plugin of the test declares."""
    return {  # type: ignore[typeddict-item]
        "type": automation_type,
        "kind": "BatchAutomation",
        "config": {"type": "object", "properties": {}},
        "queue": {"name": automation_type, "payload": {"type": "object"}},
        "stream": None,
        "pools": {},
    }


#: The admin token of every test master process.
MASTER_TOKEN = "outage-test-admin-token"


class MasterProcess:
    """``python -m fleet master`` on a free port.

    Args:
        backend_url: Its ``--backend``.
        log_dir: Where ``master.log`` is written (stdout and stderr together).
        sweep_seconds: ``FLEET_SWEEP_SECONDS`` (short, so outages show quickly).
        env: More environment variables for it.
    """

    def __init__(
        self,
        backend_url: str,
        log_dir: Path,
        *,
        sweep_seconds: float = 0.5,
        env: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_dir / "master.log"
        self._log = self.log_path.open("wb")
        env = fleet_env(
            **{
                "FLEET_ADMIN_TOKEN": MASTER_TOKEN,
                "FLEET_SWEEP_SECONDS": str(sweep_seconds),
                "FLEET_LOG_LEVEL": "INFO",
                **(env or {}),
            }
        )
        args = [sys.executable, "-m", "fleet", "master", "--port", str(self.port)]
        args += ["--backend", backend_url]
        self.proc = subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT
        )

    def client(self) -> httpx.AsyncClient:
        """An HTTP client for this master, with the admin token."""
        headers = {"Authorization": f"Bearer {MASTER_TOKEN}"}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=10)

    async def wait_ready(self, timeout: float = 30.0) -> None:
        """Until the master answers ``/healthz`` (an AssertionError after ``timeout``)."""
        async with self.client() as http:

            async def up() -> bool:
                return (await http.get("/healthz")).status_code == 200

            try:
                await until(up, timeout=timeout, interval=0.1, ignoring=(httpx.HTTPError,))
            except AssertionError:
                pass
            else:
                return
        raise AssertionError(f"the master did not come up within {timeout:g}s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def interrupt(self, timeout: float = 15.0) -> int:
        """Ctrl-C, then the exit status."""
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self._log.close()
