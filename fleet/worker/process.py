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
from fleet.core.automation import Automation
from fleet.worker.agent import Worker
from fleet.worker.backoff import RetryPolicy

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
    backend = await open_backend(backend_url)
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
