"""Fixtures of the master tests: settings with every token kind, an in-process
app (httpx over ASGI, lifespan run), and a live uvicorn master on a free port."""

from __future__ import annotations

import itertools
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from fleet.master.app import create_app
from fleet.settings import Settings
from tests.master import plugins  # registers the test automations
from tests.support.waits import until, until_sync

ADMIN = "admin-secret-token"
READ = "read-secret-token"
SCOPED = "scoped-secret-token"
OTHER_SCOPED = "other-scoped-token"

_names = itertools.count()


def settings_for(backend_url: str, **overrides: Any) -> Settings:
    """Settings with one token of each kind."""
    base: dict[str, Any] = {
        "backend_url": backend_url,
        "admin_token": ADMIN,
        "read_tokens": [READ],
        "token_scopes": {SCOPED: [plugins.SCRAPE], OTHER_SCOPED: ["elsewhere"]},
        "heartbeat_seconds": 1.0,
        "sweep_seconds": 0.2,
    }
    base.update(overrides)
    return Settings(**base)


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def memory_url() -> str:
    return f"memory://master-test-{next(_names)}"


class InProcess:
    """An app with its lifespan running, and an httpx client over ASGI."""

    def __init__(self, app: FastAPI, client: httpx.AsyncClient) -> None:
        self.app = app
        self.client = client

    @property
    def backend(self) -> Any:
        return self.app.state.fleet.backend


async def start_in_process(settings: Settings, **kw: Any) -> tuple[InProcess, Any]:
    app = create_app(settings, plugins=False, **kw)
    lifespan = app.router.lifespan_context(app)
    await lifespan.__aenter__()
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://master")
    return InProcess(app, client), lifespan


@pytest.fixture
async def master() -> AsyncIterator[InProcess]:
    """An in-process master on a fresh memory backend, sweeper off."""
    inproc, lifespan = await start_in_process(settings_for(memory_url()), sweeper=False)
    try:
        yield inproc
    finally:
        await inproc.client.aclose()
        await lifespan.__aexit__(None, None, None)


class LiveMaster:
    """A real uvicorn server running ``create_app`` in a background thread."""

    def __init__(self, settings: Settings, **kw: Any) -> None:
        # Bound here and handed to uvicorn: no other process can take the port
        # between choosing it and listening on it.
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        self.app = create_app(settings, plugins=False, **kw)
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.thread.start()

        def started() -> bool:
            if not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            return bool(self.server.started)

        until_sync(started, timeout=15, what="uvicorn to start")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'fleet.db'}"


@pytest.fixture
def live_factory() -> Iterator[Any]:
    """Start live masters; all are stopped after the test."""
    started: list[LiveMaster] = []

    def start(backend_url: str, **kw: Any) -> LiveMaster:
        settings_kw = kw.pop("settings", {})
        live = LiveMaster(settings_for(backend_url, **settings_kw), **kw)
        live.start()
        started.append(live)
        return live

    yield start
    for live in started:
        live.stop()


async def wait_for(predicate: Any, timeout: float = 15.0, what: str = "the condition") -> None:
    """Wait until an async predicate is true (for effects of background tasks)."""
    await until(predicate, timeout=timeout, what=what)
