"""A worker's book that sums what its tasks report and sends it a moment later, in
one backend call: meters (:mod:`fleet.core.metering`), failures
(:mod:`fleet.core.error_book`) and counted-only verdicts (:mod:`fleet.core.access.router`).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib


class LaterFlush(abc.ABC):
    """Sends what it holds ``seconds`` after the first addition since the last send,
    and at :meth:`close`.

    Args:
        seconds: How long an addition waits to be sent with the ones after it.
        name: The flusher task's name (seen in asyncio's debug output).
    """

    def __init__(self, seconds: float, name: str) -> None:
        self._flush_seconds = seconds
        self._flush_name = name
        self._flusher: asyncio.Task[None] | None = None

    @abc.abstractmethod
    async def flush(self) -> None:
        """Send what is held now."""

    def _schedule(self) -> None:
        """Something was added: make sure a send is on its way."""
        if self._flusher is None or self._flusher.done():
            with contextlib.suppress(RuntimeError):  # no running loop: sent at close
                self._flusher = asyncio.get_running_loop().create_task(
                    self._flush_later(), name=self._flush_name
                )

    async def _flush_later(self) -> None:
        await asyncio.sleep(self._flush_seconds)
        await self.flush()

    async def close(self) -> None:
        """Send what is held and stop the flusher."""
        if self._flusher is not None and not self._flusher.done():
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        await self.flush()
