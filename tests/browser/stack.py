"""A real master and a real worker as subprocesses, for the dashboard tests."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from fleet.backends import open_backend
from fleet.backends.base import Backend
from tests.support.redis_server import free_port
from tests.support.waits import until_sync

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ADMIN_TOKEN = "dash-admin-token-0123456789"
READ_TOKEN = "dash-read-token-0123456789"
SCOPED_TOKEN = "dash-scoped-token-0123456789"
PLUGIN = "tests.browser.dash_plugin"
REPO = Path(__file__).resolve().parents[2]


def fleet_env(backend_url: str, python_path: Sequence[str] = ()) -> dict[str, str]:
    """Environment of both processes: fast heartbeats so tests wait little
    (``python_path``: more directories for ``PYTHONPATH``, after the repository)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEET_")}
    env.update(
        FLEET_BACKEND_URL=backend_url,
        FLEET_ADMIN_TOKEN=ADMIN_TOKEN,
        FLEET_READ_TOKENS=READ_TOKEN,
        FLEET_TOKEN_SCOPES=json.dumps({SCOPED_TOKEN: ["dash-echo"]}),
        FLEET_HEARTBEAT_SECONDS="1",
        FLEET_SWEEP_SECONDS="1",
        FLEET_RESYNC_SECONDS="2",
        FLEET_ENTRY_POINTS="0",  # only the test plugin, whatever the venv has installed
        PYTHONPATH=os.pathsep.join([str(REPO), *python_path]),
    )
    return env


@dataclass
class Stack:
    """One master (uvicorn) and one worker process over one backend.

    Attributes:
        backend_url: The shared backend.
        logs: Directory of the processes' output.
        worker_id: Id the worker registers under.
        plugin: The plugin module the worker runs.
        python_path: More directories for both processes' ``PYTHONPATH``.
    """

    backend_url: str
    logs: Path
    worker_id: str = "dash-worker-1"
    plugin: str = PLUGIN
    python_path: tuple[str, ...] = ()
    #: More environment for both processes (after :func:`fleet_env`).
    extra_env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        out = (self.logs / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, *args],
            cwd=REPO,
            env={**fleet_env(self.backend_url, self.python_path), **self.extra_env},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        out.close()
        self.procs.append(proc)
        return proc

    def start(self) -> None:
        """Start both processes and wait until the worker shows in the API."""
        self._start_master()
        self.spawn_worker(self.worker_id)
        self.wait_for(self._worker_up, 30, "the master to list the worker as up")

    def restart_master(self) -> None:
        """Stop the master (SIGTERM) and start a new one on the same port."""
        master = self.procs[0]
        master.terminate()
        master.wait(timeout=15)
        self.procs[0] = self._start_master(append=False)
        self.wait_for(self._worker_up, 30, "the new master to list the worker as up")

    def _start_master(self, append: bool = True) -> subprocess.Popen[bytes]:
        proc = self._spawn(
            "master",
            [
                "-m",
                "uvicorn",
                "--factory",
                "fleet.master.app:create_app",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--log-level",
                "warning",
            ],
        )
        if not append:
            self.procs.remove(proc)
        return proc

    def spawn_worker(
        self, worker_id: str, more_plugins: Sequence[str] = ()
    ) -> subprocess.Popen[bytes]:
        """Start one more worker process of the test plugin (and ``more_plugins``: one
        process running several types, as ``fleet dev`` does)."""
        plugins = [arg for plugin in (self.plugin, *more_plugins) for arg in ("--plugin", plugin)]
        return self._spawn(worker_id, ["-m", "fleet", "worker", *plugins, "--id", worker_id])

    def _worker_up(self) -> bool:
        try:
            workers = self.api("GET", "/workers").json()
        except httpx.HTTPError:
            return False
        return any(w["worker_id"] == self.worker_id and w["up"] for w in workers)

    def api(self, method: str, path: str, json: Any = None) -> httpx.Response:
        """Call the master as admin."""
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        return httpx.request(
            method, f"{self.url}/api/v1{path}", headers=headers, json=json, timeout=5
        )

    def wait_for(self, check: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll ``check()`` until true; on timeout fail with the processes' logs."""

        def ready() -> bool:
            for proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"a process exited ({proc.returncode}):\n{self.log_tail()}")
            return check()

        try:
            until_sync(ready, timeout=timeout, interval=0.2, what=what)
        except AssertionError as exc:
            raise TimeoutError(f"{exc}:\n{self.log_tail()}") from None

    def log_tail(self, n: int = 3000) -> str:
        parts = []
        for log in sorted(self.logs.glob("*.log")):
            parts.append(f"--- {log.name}\n{log.read_text(errors='replace')[-n:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        """Terminate both processes (worker first, so it can write STOPPED)."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def running_stack(
    request: Any, tmp_path_factory: Any, name: str, extra_env: dict[str, str] | None = None
) -> Iterator[Stack]:
    """A started :class:`Stack` on a fresh backend of the kind ``request.param`` names
    (``sqlite``, or ``redis``: the session's server, flushed), stopped after use."""
    logs = tmp_path_factory.mktemp(f"{name}-{request.param}")
    if request.param == "sqlite":
        url = f"sqlite:///{logs / 'fleet.db'}"
    else:
        import redis

        url = request.getfixturevalue("redis_server").url
        client = redis.Redis.from_url(url)
        client.flushall()
        client.close()
    s = Stack(backend_url=url, logs=logs, extra_env=dict(extra_env or {}))
    try:
        s.start()
        yield s
    finally:
        s.stop()


def on_backend(stack: Stack, work: Callable[[Backend], Awaitable[None]]) -> None:
    """Run ``work`` on the stack's backend, opened for it (Playwright's sync API runs an
    event loop in the test's thread: the backend gets a thread of its own)."""

    async def go() -> None:
        backend = await open_backend(stack.backend_url)
        try:
            await work(backend)
        finally:
            await backend.close()

    with ThreadPoolExecutor(1) as pool:
        pool.submit(lambda: asyncio.run(go())).result()
