"""A master's background job that runs every period (the sweeper, the history
recorder): the loop, its start and stop, and how a failed pass is logged."""

from __future__ import annotations

import abc
import asyncio
import logging
from typing import Any

from fleet.backends.base import Backend
from fleet.core.cancelling import cancel_and_wait
from fleet.core.errors import BackendError
from fleet.core.outage import OutageLog, is_outage


class Periodic(abc.ABC):
    """Runs :meth:`tick` every ``period`` seconds until stopped; a pass that fails
    is logged (an outage once, with ``hint``) and never ends the loop.

    Args:
        backend: The backend the job works on.
        period: Seconds between passes.
    """

    #: The job's name in logs and in its task's name (``fleet-<name>``).
    name: str
    #: What an outage means for the job, for the outage log line.
    hint: str
    #: Log lines of a pass lost to a backend error (``%s``: the error) or to a bug.
    skipped: str
    failed: str

    def __init__(self, backend: Backend, period: float, log: logging.Logger) -> None:
        self.backend = backend
        self.period = period
        self._log = log
        self._task: asyncio.Task[None] | None = None
        self._outages = OutageLog(log)

    @abc.abstractmethod
    async def tick(self) -> Any:
        """One pass."""

    def on_backend_error(self) -> None:  # noqa: B027 - a hook; most jobs need none
        """Called when a pass failed on a backend error (before it is logged)."""

    async def run(self) -> None:
        """Tick every period until cancelled; errors are logged, never fatal."""
        while True:
            try:
                await self.tick()
                self._outages.recovered(self.name)
            except BackendError as exc:
                self.on_backend_error()
                if is_outage(exc):
                    self._outages.failed(self.name, exc, hint=self.hint)
                else:
                    self._log.warning(self.skipped, exc)
            except Exception:
                self._log.exception(self.failed)
            await asyncio.sleep(self.period)

    def start(self) -> None:
        """Run :meth:`run` in a background task."""
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name=f"fleet-{self.name}")

    async def stop(self) -> None:
        """Stop the loop (a pass under way is cancelled)."""
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait(task)
