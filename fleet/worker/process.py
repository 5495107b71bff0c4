"""Running a :class:`Worker` as the process's main job: open the backend,
install signal handlers (first SIGTERM/SIGINT drains, a second one exits at
once), run, close."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Mapping, Sequence
from typing import Any

from fleet.backends import redact_url
from fleet.backends.base import Backend
from fleet.backends.waiting import open_when_reachable
from fleet.core.automation import Automation
from fleet.core.backoff import RetryPolicy, backoff_delay
from fleet.core.errors import BackendUnavailable
from fleet.core.outage import OutageLog
from fleet.worker.agent import Worker
from fleet.worker.identity import IdClaim, claim_worker_id

log = logging.getLogger("fleet.worker")

#: Exit status when a second signal cuts the graceful shutdown short.
FORCED_EXIT_STATUS = 130


def install_signal_handlers(worker: Worker, same_within: float = 0.0) -> None:
    """SIGTERM/SIGINT once: graceful stop; twice: exit immediately.

    ``same_within``: a signal that comes within this many seconds of the first is
    the same stop, not a second one. A process forked by ``--processes`` gets a stop
    twice at once when the terminal (Ctrl-C) or systemd (its control group) signals
    it as well as its parent, which passes the signal on.
    """
    loop = asyncio.get_running_loop()
    received = 0
    first = 0.0

    def handle(signum: int) -> None:
        nonlocal received, first
        if received and loop.time() - first < same_within:
            return
        received += 1
        if received == 1:
            first = loop.time()
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
    return await open_when_reachable(url, "worker", log)


def describe_types(types: Sequence[str], origins: Mapping[str, str]) -> str:
    """``a (from pkg-a 1.0), b (from --plugin mod)``: what a worker runs and whence."""
    return ", ".join(f"{t} (from {origins[t]})" if t in origins else t for t in types)


async def _claim_with_retry(
    backend: Backend, worker_id: str | None, heartbeat_seconds: float
) -> IdClaim:
    # Held for three heartbeats: a worker that dies frees its id within that time for
    # other hosts (at once for a restart on this host, see fleet.worker.identity).
    hold = max(3 * heartbeat_seconds, 10.0)
    failures = 0
    outages = OutageLog(log)  # one line per outage, not one per retry
    while True:
        try:
            claim = await claim_worker_id(backend.kv, worker_id, hold_seconds=hold)
        except BackendUnavailable as exc:
            failures += 1
            delay = backoff_delay(failures, base=0.5, cap=30.0)
            outages.failed("worker id claim", exc)
            await asyncio.sleep(delay)
            continue
        outages.recovered("worker id claim")
        return claim


async def serve(
    backend_url: str,
    classes: Sequence[type[Automation[Any]]],
    worker_id: str | None,
    *,
    grace: float,
    heartbeat_seconds: float,
    resync_seconds: float,
    origins: Mapping[str, str] | None = None,
    same_signal_within: float = 0.0,
    exit_when_idle: float | None = None,
) -> None:
    """Run a worker until a signal stops it (or, with ``exit_when_idle``, until it
    had nothing to do for that many seconds).

    Args:
        origins: Where each type came from (``package version``), for the first log line.
        same_signal_within: See :func:`install_signal_handlers`.

    Raises:
        UnsupportedBackend: Unknown backend URL scheme.
        BackendUnavailable: The backend cannot be reached at start.
        WorkerIdInUse: ``worker_id`` is held by a live worker process.
    """
    backend = await _open_with_retry(backend_url)
    try:
        claim = await _claim_with_retry(backend, worker_id, heartbeat_seconds)
        worker = Worker(
            backend,
            classes,
            claim.worker_id,
            grace=grace,
            heartbeat_seconds=heartbeat_seconds,
            resync_seconds=resync_seconds,
            policy=RetryPolicy.from_env(),
            id_claim=claim,
            exit_when_idle=exit_when_idle,
        )
        install_signal_handlers(worker, same_signal_within)
        log.info(
            "worker %s on %s runs %s",
            worker.worker_id,
            redact_url(backend_url),
            describe_types([c.automation_type for c in classes], origins or {}),
        )
        await worker.run()
    finally:
        await backend.close()
