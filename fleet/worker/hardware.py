"""What a worker reports about its machine and process (psutil)."""

from __future__ import annotations

import os
import platform
import socket
import sys

import psutil

import fleet


def host_name() -> str:
    """This machine's host name (the default worker id)."""
    return socket.gethostname() or "localhost"


def hardware() -> dict[str, object]:
    """The hardware record of docs/protocol.md (written by ``workers.register``).

    Returns:
        ``{host, platform, python, cpu_count, memory_bytes, pid, fleet_version}``.
    """
    return {
        "host": host_name(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu_count": os.cpu_count() or 1,
        "memory_bytes": int(psutil.virtual_memory().total),
        "pid": os.getpid(),
        "fleet_version": fleet.__version__,
    }


class ProcessSampler:
    """CPU percent since the previous sample, and resident memory, of this process."""

    def __init__(self) -> None:
        self._proc = psutil.Process()
        self._proc.cpu_percent(None)  # primes the counter; the first call answers 0.0

    def sample(self) -> tuple[float, int]:
        """``(cpu_percent, rss_bytes)``; cpu is measured since the last call."""
        try:
            return float(self._proc.cpu_percent(None)), int(self._proc.memory_info().rss)
        except psutil.Error:
            return 0.0, 0
