"""Opening a backend that may not be up yet: a master or worker started before
its Redis (a reboot, a deploy in the wrong order) waits for it instead of exiting."""

from __future__ import annotations

import asyncio
import logging

from fleet.backends import open_backend, redact_url
from fleet.backends.base import Backend
from fleet.core.backoff import backoff_delay
from fleet.core.errors import BackendUnavailable
from fleet.core.outage import OutageLog

#: Said once, with the first failure: what an operator should look at.
CHECK_HINT = (
    "check that it is running and reachable from this host, and that --backend "
    "or FLEET_BACKEND_URL names it; waiting for it"
)


def describe(url: str, exc: BaseException) -> str:
    """The error's text, naming the backend's URL (password redacted) if it does not."""
    text = str(exc)
    safe = redact_url(url)
    return text if safe in text else f"{safe}: {text}"


async def open_when_reachable(
    url: str,
    component: str,
    logger: logging.Logger,
    *,
    outages: OutageLog | None = None,
) -> Backend:
    """Open the backend of ``url``, retrying with backoff (0.5 s doubling up to
    30 s) for as long as it is unreachable; cancel the caller to give up.

    The wait is logged as one outage of ``component``: a line naming the URL and
    what to check, a line every 30 s while it lasts, a line once it is open.

    Raises:
        UnsupportedBackend: Unknown scheme or missing driver (not worth waiting for).
    """
    outages = outages or OutageLog(logger)
    failures = 0
    while True:
        try:
            backend = await open_backend(url)
        except BackendUnavailable as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                # A Ctrl-C that lands inside a connect attempt can come back as a
                # connection error (the driver's timeout swallows the cancel): stop.
                raise asyncio.CancelledError from exc
            failures += 1
            outages.failed(component, describe(url, exc), hint=CHECK_HINT)
            await asyncio.sleep(backoff_delay(failures, base=0.5, cap=30.0))
            continue
        outages.recovered(component)
        return backend
