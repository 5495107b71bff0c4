"""``ctx.limit``: a fleet-wide limiter on the calls made inside tasks.

One limiter (a key such as ``"api-key:alpha"``) is shared by every worker of every
automation type on the backend, so several automations can spend one quota::

    async with ctx.limit("api-key:alpha", rate="10/s", concurrency=4, timeout=5):
        await call_the_api()

The handle is a thin layer over :class:`~fleet.core.capabilities.Limiters`: it
waits for a place (sleeping what the backend says, never polling faster), keeps
the place while the block runs and frees it when the block ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from typing import TYPE_CHECKING, Any

from fleet.core.errors import ContractValueError, Throttled
from fleet.core.flow import Rate, check_concurrency, check_group, parse_rate
from fleet.core.records import new_token

if TYPE_CHECKING:
    from fleet.core.capabilities import Limiters

log = logging.getLogger("fleet.limit")

#: Added to a wait the backend gives, so that the retry comes surely after the
#: moment it names (the event loop's clock and the wall clock drift apart a little).
WAIT_SLACK = 0.002


def _seconds(value: Any, field: str, *, zero_ok: bool) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        rule = ">= 0" if zero_ok else "> 0"
        raise ContractValueError(f"{field} must be a number of seconds {rule}", field=field)
    return float(value)


class Limit:
    """A place in a fleet-wide limiter (``ctx.limit(key, rate=..., concurrency=...)``).

    ``async with`` waits until the limiter has a free place (fewer than
    ``concurrency`` calls in flight, fleet-wide) and its rate allows a start, for
    at most ``timeout`` seconds (0: try once), then runs the block holding the
    place. While the block runs the hold is renewed every ``hold_seconds / 3``;
    a worker that dies loses its place after ``hold_seconds``. Leaving the block
    frees the place, also on an exception or a cancellation. The rate counts
    starts: a place freed early does not give back its start.

    Args:
        limits: The backend's limiters (``backend.limits``).
        key: The limiter, fleet-wide (not per automation type): a non-empty
            string of at most 200 characters without control characters.
        rate: At most this many starts per period, evenly spaced: ``"10/s"``,
            ``"100/m"``, ``"3/10s"`` (see :func:`fleet.core.flow.parse_rate`).
        concurrency: At most this many holders at once (an integer >= 1).
        timeout: Seconds to wait for a place (>= 0).
        hold_seconds: How long a place outlives its holder without a renewal.

    Raises:
        ContractValueError: (a ``ValueError``) for an invalid argument, or if
            neither ``rate`` nor ``concurrency`` is given.
        Throttled: From ``async with`` (or :meth:`acquire`), when no place came
            within ``timeout``; its ``retry_after`` is the backend's estimate of
            when one frees. Raised as soon as that estimate lies beyond the
            timeout (a rate's next start is known exactly), not only at the end.
    """

    def __init__(
        self,
        limits: Limiters,
        key: str,
        *,
        rate: str | None = None,
        concurrency: int | None = None,
        timeout: float = 30.0,
        hold_seconds: float = 60.0,
    ) -> None:
        self.key = check_group(key, field="key")
        self.rate: Rate | None = None if rate is None else parse_rate(rate)
        self.concurrency = check_concurrency(concurrency)
        if self.rate is None and self.concurrency is None:
            raise ContractValueError(
                "ctx.limit needs rate=..., concurrency=... or both", field="rate"
            )
        self.timeout = _seconds(timeout, "timeout", zero_ok=True)
        self.hold_seconds = _seconds(hold_seconds, "hold_seconds", zero_ok=False)
        self._limits = limits
        self._token = ""
        self._renewer: asyncio.Task[None] | None = None
        #: True while this handle holds its place.
        self.held = False
        #: Seconds the last acquire waited for its place.
        self.waited = 0.0

    async def acquire(self) -> None:
        """Wait for a place (see the class docstring).

        Raises:
            Throttled: No place within ``timeout``.
            ContractValueError: The handle already holds a place.
        """
        if self.held or self._renewer is not None:
            raise ContractValueError(
                f"limit {self.key!r} is already held by this handle; "
                "use a new ctx.limit(...) for a nested call",
                field="key",
            )
        loop = asyncio.get_running_loop()
        start = loop.time()
        deadline = start + self.timeout
        token = new_token()
        interval = None if self.rate is None else self.rate.interval
        while True:
            try:
                wait = await self._limits.acquire(
                    self.key,
                    token,
                    interval=interval,
                    concurrency=self.concurrency,
                    hold_seconds=self.hold_seconds,
                )
            except asyncio.CancelledError:
                # The backend may have taken the place before the cancellation.
                await self._release_quietly(token)
                raise
            if wait <= 0:
                break
            left = deadline - loop.time()
            if wait > left:
                raise Throttled(
                    wait,
                    f"limit {self.key!r}: no place within {self.timeout:g} s "
                    f"(retry after {wait:.3g} s)",
                )
            await asyncio.sleep(min(wait + WAIT_SLACK, left))
        self._token = token
        self.held = True
        self.waited = loop.time() - start
        self._renewer = asyncio.create_task(self._renew(), name=f"limit:{self.key}")

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.hold_seconds / 3)
            try:
                kept = await self._limits.renew(self.key, self._token, self.hold_seconds)
            except Exception as exc:  # an outage: the next period tries again
                log.warning("limit %r: renewing the hold failed: %s", self.key, exc)
                continue
            if not kept:
                log.warning("limit %r: the place was lost (its hold expired)", self.key)
                self.held = False
                return

    async def _release_quietly(self, token: str) -> None:
        with contextlib.suppress(Exception):
            await asyncio.shield(self._limits.release(self.key, token))

    async def release(self) -> bool:
        """Free the place; True if this handle still held it."""
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer
            self._renewer = None
        if not self.held:
            return False
        self.held = False
        return await self._limits.release(self.key, self._token)

    async def __aenter__(self) -> Limit:
        await self.acquire()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is None:
            await asyncio.shield(self.release())
            return
        # The block's own exception matters more than a failed release (the place
        # then frees itself after hold_seconds).
        with contextlib.suppress(Exception):
            await asyncio.shield(self.release())
