"""Running a :class:`Worker` as the process's main job: open the backend,
install signal handlers (first SIGTERM/SIGINT drains, a second one exits at
once), run, close."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Sequence
from typing import Any

from fleet.backends import open_backend, redact_url
from fleet.backends.base import Backend
from fleet.core.automation import Automation
from fleet.core.errors import BackendUnavailable
from fleet.worker.agent import Worker
from fleet.worker.backoff import RetryPolicy, backoff_delay

log = logging.getLogger("fleet.worker")

#: Exit status when a second signal cuts the graceful shutdown short.
FORCED_EXIT_STATUS = 130


def install_signal_handlers(worker: Worker) -> None:
    """SIGTERM/SIGINT once: graceful stop; twice: exit immediately."""
    loop = asyncio.get_running_loop()
    received = 0

    def handle(signum: int) -> None:
        nonlocal received
        received += 1
        if received == 1:
            log.warning(
                "received %s: draining (grace %.0fs; send it again to exit at once)",
                signal.Signals(signum).name,
                worker.grace,
            )
            worker.request_stop()
        else:
            log.error("received %s again: exiting now", signal.Signals(signum).name)
            os._exit(FORCED_EXIT_STATUS)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, handle, sig)


async def _open_with_retry(url: str) -> Backend:
    # A worker may start before its Redis does: wait for it instead of exiting.
    failures = 0
    while True:
        try:
            return await open_backend(url)
        except BackendUnavailable as exc:
            failures += 1
            delay = backoff_delay(failures, base=0.5, cap=30.0)
            log.warning(
                "backend %s unavailable (%s); retrying in %.1fs", redact_url(url), exc, delay
            )
            await asyncio.sleep(delay)


async def serve(
    backend_url: str,
    classes: Sequence[type[Automation[Any]]],
    worker_id: str | None,
    *,
    grace: float,
    heartbeat_seconds: float,
    resync_seconds: float,
) -> None:
    """Run a worker until a signal stops it.

    Raises:
        UnsupportedBackend: Unknown backend URL scheme.
        BackendUnavailable: The backend cannot be reached at start.
    """
    backend = await _open_with_retry(backend_url)
    try:
        worker = Worker(
            backend,
            classes,
            worker_id,
            grace=grace,
            heartbeat_seconds=heartbeat_seconds,
            resync_seconds=resync_seconds,
            policy=RetryPolicy.from_env(),
        )
        install_signal_handlers(worker)
        log.info("worker %s on %s", worker.worker_id, redact_url(backend_url))
        await worker.run()
    finally:
        await backend.close()
