"""Fixtures for the example plugins: their sources on ``sys.path``, the demo site,
a backend and a way to build a slot's Context without installing anything."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core import Context
from fleet.core.automation import Automation
from fleet.dev.demo_site import create_demo_app
from fleet.dev.demo_state import DemoSettings, DemoState
from fleet.dev.serve import RunningServer, start_server
from tests.support.waits import until

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE_DIRS = sorted(p for p in EXAMPLES.iterdir() if (p / "pyproject.toml").exists())

#: Set by test_install.py when it reruns these tests in a venv with the examples installed.
INSTALLED = os.environ.get("FLEET_EXAMPLES_INSTALLED") == "1"

# The example packages are plain source trees: import them in place instead of
# pip-installing them into the shared test environment.
if not INSTALLED:
    for _d in EXAMPLE_DIRS:
        if str(_d) not in sys.path:
            sys.path.insert(0, str(_d))

_memory_counter = 0


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> bool:
    """Wait until ``check`` answers True (True); an AssertionError after ``timeout``."""
    return bool(await until(check, timeout=timeout, what=getattr(check, "__name__", "check")))


class DemoSite:
    """The demo site served on a free loopback port, with its live state."""

    def __init__(self, server: RunningServer, state: DemoState) -> None:
        self.server = server
        self.state = state
        self.url = server.url
        self.site = f"{server.host}:{server.port}"


@pytest.fixture
def demo_settings() -> DemoSettings:
    """Deterministic demo behaviour: no random failures (override per test)."""
    return DemoSettings(failure_rate=0.0, seed=1)


@pytest.fixture
async def demo_site(demo_settings: DemoSettings) -> AsyncIterator[DemoSite]:
    """The real demo site over real HTTP on 127.0.0.1:<free port>."""
    app = create_demo_app(demo_settings)
    server = await start_server(app, "127.0.0.1", 0)
    try:
        yield DemoSite(server, app.state.demo)
    finally:
        await server.stop()


@pytest.fixture
async def mem_backend() -> AsyncIterator[Backend]:
    """A fresh in-memory backend."""
    global _memory_counter
    _memory_counter += 1
    backend = await open_backend(f"memory://examples-{_memory_counter}")
    try:
        yield backend
    finally:
        await backend.close()


MakeCtx = Callable[..., Context[Any]]


@pytest.fixture
def make_ctx(mem_backend: Backend) -> MakeCtx:
    """Build the Context a worker slot of ``cls`` would get, with ``config`` overrides."""

    def make(cls: type[Automation[Any]], slot_id: int = 0, **config: Any) -> Context[Any]:
        validated = cls.Config.model_validate(config)
        return Context(
            backend=mem_backend,
            automation_type=cls.automation_type,
            config=lambda: validated,
            slot_id=slot_id,
            output=cls.Output,
        )

    return make
