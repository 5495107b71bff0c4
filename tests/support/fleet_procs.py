"""Real ``fleet worker`` processes for the multi-process tests, and the wait until they
(and a master) serve."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx

from fleet.backends.base import Backend
from tests.worker.procs import ROOT
from tests.worker.support import state_of, wait_until


@contextmanager
def worker_processes(
    url: str,
    plugin: str,
    automation_type: str,
    worker_ids: Sequence[str],
    log_dir: Path,
    env: dict[str, str],
    *,
    grace: float | None = None,
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """One ``fleet worker --type`` process per id, each logging to ``<log_dir>/<id>.log``;
    killed (and their logs closed) on the way out, also when the test failed."""
    procs: list[subprocess.Popen[bytes]] = []
    logs = []
    try:
        for wid in worker_ids:
            log = (log_dir / f"{wid}.log").open("wb")
            logs.append(log)
            args = [sys.executable, "-m", "fleet", "worker", "--plugin", plugin]
            args += ["--type", automation_type, "--id", wid, "--backend", url]
            if grace is not None:
                args += ["--grace", str(grace)]
            procs.append(
                subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
            )
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait(10)
        for log in logs:
            log.close()


async def wait_up(
    backend: Backend,
    automation_type: str,
    worker_ids: Sequence[str],
    http: httpx.AsyncClient | None = None,
    timeout: float = 60,
) -> None:
    """Until every worker runs the type (RUNNING or IDLE) and, given ``http``, the
    master answers ``/healthz``."""

    async def up() -> bool:
        if http is not None:
            try:
                if (await http.get("/healthz")).status_code != 200:
                    return False
            except httpx.HTTPError:
                return False
        for wid in worker_ids:
            if (await state_of(backend, automation_type, wid)).get("state") not in (
                "RUNNING",
                "IDLE",
            ):
                return False
        return True

    what = "master and workers up" if http is not None else "workers up"
    await wait_until(up, timeout=timeout, interval=0.2, what=what)
