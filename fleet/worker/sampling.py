"""Process signals adaptive slots read (:mod:`fleet.worker.autoslots`): CPU since
the previous read, resident memory, the machine's available memory, and how late
the event loop runs a timer.

Nothing here runs per task: the controller ticks a few times a second per type.
"""

from __future__ import annotations

import time

import psutil


class ProcessProbe:
    """CPU percent of this process since the previous :meth:`read` (its own counter,
    apart from the heartbeat's), its RSS, and the machine's free memory."""

    def __init__(self) -> None:
        self._proc = psutil.Process()
        self._proc.cpu_percent(None)  # primes this instance's counter

    def read(self) -> tuple[float, int, float]:
        """``(cpu_percent, rss_bytes, free_memory_percent)``; zeros (and 100 % free)
        when psutil cannot tell (the signals then hold nothing back)."""
        try:
            cpu = float(self._proc.cpu_percent(None))
            rss = int(self._proc.memory_info().rss)
            mem = psutil.virtual_memory()
            free = 100.0 * float(mem.available) / float(mem.total or 1)
        except psutil.Error:
            return 0.0, 0, 100.0
        return cpu, rss, free


class LagMeter:
    """How late a sleeping coroutine wakes: the event loop's lag. The caller sleeps
    ``period`` between :meth:`tick` calls; the worst lateness since :meth:`take`."""

    def __init__(self, period: float) -> None:
        self.period = period
        self._due = time.monotonic() + period
        self.worst = 0.0

    def tick(self) -> None:
        """Called after each sleep of ``period``: note how late it woke."""
        now = time.monotonic()
        self.worst = max(self.worst, now - self._due)
        self._due = now + self.period

    def take(self) -> float:
        """The worst lag since the previous call (seconds), and start over."""
        worst, self.worst = self.worst, 0.0
        return max(worst, 0.0)
