"""``ctx.progress``: a slot's progress reports, coalesced so they stay cheap.

A slot writes its task's progress at most once per
:data:`~fleet.core.results.PROGRESS_INTERVAL`: a report inside the interval only
replaces the pending one, and a timer sends the latest when the interval is
over. The pending report is sent when the task ends (:meth:`ProgressReporter.flush`),
so the record always holds the last one. Reports are best effort: a backend
error is logged, never raised into ``run_one``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from fleet.core.capabilities import Streams
from fleet.core.results import PROGRESS_INTERVAL

log = logging.getLogger("fleet.progress")

#: (task id, attempt, fraction, message)
Report = tuple[str, int, float | None, str | None]


class ProgressReporter:
    """The progress writer of one slot.

    Args:
        streams: Where reports go (:meth:`~fleet.core.capabilities.Streams.progress`).
        automation_type: The slot's type.
        interval: Shortest time between two writes (seconds).
        clock: Monotonic seconds (tests pass their own).
    """

    def __init__(
        self,
        streams: Streams,
        automation_type: str,
        *,
        interval: float = PROGRESS_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._streams = streams
        self._type = automation_type
        self._interval = interval
        self._clock = clock
        self._pending: Report | None = None
        self._last = -float("inf")
        self._timer: asyncio.TimerHandle | None = None
        self._sending: set[asyncio.Task[None]] = set()
        #: Writes made (for tests and the benchmark).
        self.writes = 0

    async def report(self, report: Report) -> None:
        """Keep ``report`` as the latest; write it now if the interval is over,
        else leave it to the timer."""
        self._pending = report
        if self._timer is not None:
            return  # a write is already due: it takes the latest report
        wait = self._last + self._interval - self._clock()
        if wait <= 0:
            await self._send()
        else:
            self._timer = asyncio.get_running_loop().call_later(wait, self._due)

    def flush(self) -> None:
        """The task ended: send the pending report now (in the background)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._pending is not None:
            self._spawn()

    async def drain(self) -> None:
        """Wait for the writes in flight (tests, shutdown)."""
        self.flush()
        while self._sending:
            await asyncio.gather(*list(self._sending), return_exceptions=True)

    def _due(self) -> None:
        self._timer = None
        self._spawn()

    def _spawn(self) -> None:
        task = asyncio.get_running_loop().create_task(self._send())
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self) -> None:
        pending, self._pending = self._pending, None
        if pending is None:
            return
        self._last = self._clock()
        task_id, attempt, fraction, message = pending
        self.writes += 1
        try:
            await self._streams.progress(
                self._type, task_id, attempt=attempt, fraction=fraction, message=message
            )
        except Exception as exc:  # best effort: a report must never fail the task
            log.warning("%s: progress of task %s not written: %s", self._type, task_id, exc)
