"""Real ``python -m fleet`` processes for the worker tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Fast heartbeats, retries and re-reads so process tests finish quickly.
FAST_ENV = {
    "FLEET_HEARTBEAT_SECONDS": "0.3",
    "FLEET_RETRY_BASE_SECONDS": "0.05",
    "FLEET_RETRY_MAX_SECONDS": "0.2",
    "FLEET_RESYNC_SECONDS": "2",
    "FLEET_PLUGINS": "",
}


def fleet_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, **FAST_ENV, **extra}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


class WorkerProcess:
    """A ``fleet worker`` child process whose output goes to a log file."""

    def __init__(
        self,
        backend_url: str,
        plugin: str,
        automation_type: str,
        worker_id: str,
        log_dir: Path,
        *,
        grace: float = 30.0,
        more_args: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.worker_id = worker_id
        self.log_path = log_dir / f"{worker_id}.log"
        self._log = self.log_path.open("wb")
        args = [sys.executable, "-m", "fleet", "worker", "--plugin", plugin]
        args += ["--type", automation_type, "--id", worker_id, "--backend", backend_url]
        args += ["--grace", str(grace), *more_args]
        self.proc = subprocess.Popen(
            args,
            cwd=ROOT,
            env=fleet_env(**(env or {})),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self._log.close()
