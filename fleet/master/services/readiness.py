"""``/readyz`` from a cached probe: however often it is asked, the backend is
pinged at most once a :data:`PROBE_MAX_AGE` (probes asked meanwhile share the
answer, or the one ping in flight), so probing the master costs the store nothing."""

from __future__ import annotations

import asyncio
import time

from fleet.backends.base import Backend

#: Seconds a probe's answer is served before the backend is pinged again.
PROBE_MAX_AGE = 1.0


class Readiness:
    """The backend's last answer to a ping, at most ``max_age`` seconds old.

    Args:
        backend: What is pinged.
        max_age: Seconds an answer is reused.
    """

    def __init__(self, backend: Backend, max_age: float = PROBE_MAX_AGE) -> None:
        self._backend = backend
        self.max_age = max_age
        self._answer = False
        self._at = float("-inf")
        self._probe: asyncio.Task[bool] | None = None

    async def ready(self) -> bool:
        """True if the backend answered a ping at most ``max_age`` seconds ago
        (asked now, once for every caller, if the last answer is older)."""
        if time.monotonic() - self._at <= self.max_age:
            return self._answer
        if self._probe is None:
            self._probe = asyncio.create_task(self._ping(), name="fleet-readyz")
        # shielded: a caller that leaves does not cancel the others' probe
        return await asyncio.shield(self._probe)

    async def _ping(self) -> bool:
        asked = time.monotonic()  # the answer is as old as the question
        try:
            answer = await self._backend.ping()  # never raises
        finally:
            self._probe = None
        self._answer = answer
        self._at = asked
        return answer

    async def close(self) -> None:
        """Cancel a probe in flight (the master is stopping)."""
        probe = self._probe
        if probe is not None:
            probe.cancel()
            await asyncio.gather(probe, return_exceptions=True)
