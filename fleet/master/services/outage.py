"""The REST API's 503s during a backend outage, as one outage in the log.

Every request that finds the backend down answers 503; a dashboard or a
script polling the master would otherwise write one warning per request.
Requests only tell that the backend is down, never that it is back (most
never touch it), so while it is down a probe pings it every ``probe_seconds``
and reports the recovery.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from fleet.backends.base import Backend
from fleet.core.outage import OutageLog

#: The component name in the log.
COMPONENT = "API"
#: Seconds between two pings while the backend is down.
PROBE_SECONDS = 1.0


class ApiOutage:
    """Logs the API's outage once, then once every 30 s, then once it is over.

    Args:
        logger: Where the lines go.
        probe_seconds: Seconds between two pings while the backend is down.
    """

    def __init__(self, logger: logging.Logger, *, probe_seconds: float = PROBE_SECONDS) -> None:
        self.outages = OutageLog(logger)
        self.probe_seconds = probe_seconds
        self._probe: asyncio.Task[None] | None = None

    def failed(self, backend: Backend | None, exc: BaseException) -> None:
        """A request found the backend unavailable (called by the 503 handler)."""
        self.outages.failed(COMPONENT, exc, hint="answering 503 until it is back")
        if backend is not None and (self._probe is None or self._probe.done()):
            self._probe = asyncio.create_task(self._watch(backend), name="fleet-api-outage")

    async def _watch(self, backend: Backend) -> None:
        while self.outages.is_down(COMPONENT):
            await asyncio.sleep(self.probe_seconds)
            if await backend.ping():  # never raises
                self.outages.recovered(COMPONENT)

    async def close(self) -> None:
        """Stop probing (the master is shutting down)."""
        if self._probe is not None:
            self._probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe
            self._probe = None
