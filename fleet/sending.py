"""Where a function task's submits go (``fetch_title.submit(...)``): a backend,
opened for the call, or a master's REST API.

Chosen per submit: ``options(backend=...)`` or ``options(master=..., token=...)``
if given; else the master at ``FLEET_MASTER_URL`` when that is set (with
``FLEET_ADMIN_TOKEN`` or the local master's token file); else the backend at
``FLEET_BACKEND_URL`` (default ``sqlite:///./fleet.db``), as a worker on this
machine would use it.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from pydantic import ValidationError

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.client.http import ClientError, FleetClient
from fleet.client.tokenfile import UnsafeTokenFile, read_token, token_path
from fleet.core import tracing
from fleet.core.errors import ConfigError, ContractValueError
from fleet.core.results import FINAL_STATES, MAX_WAIT_SECONDS
from fleet.core.submission import make_push_request
from fleet.core.targets import Ended, Target
from fleet.settings import Settings

#: Between two reads of a task's record on a backend (seconds, doubling up to the cap).
FIRST_POLL, MAX_POLL = 0.02, 0.5


class BackendTarget:
    """Submits straight into a backend (what a worker reads); records from it too."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    async def push(self, automation_type: str, payload: Any, options: dict[str, Any]) -> str:
        queues = self.backend.queues
        if not tracing.ACTIVE:
            result = await queues.push_one(automation_type, make_push_request(payload, **options))
        else:
            with tracing.submit_span(automation_type) as traceparent:
                request = make_push_request(payload, traceparent=traceparent, **options)
                result = await queues.push_one(automation_type, request)
        if not result.queued and not result.duplicate:
            raise ContractValueError(
                f"{automation_type}: the task was not queued ({result.refused or 'its run ended'})",
                field="run",
            )
        return result.task_id

    async def ended(self, automation_type: str, task_id: str, wait: float) -> Ended:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(wait, 0.0)
        pause = FIRST_POLL
        while True:
            info = await self.backend.queues.state(automation_type, task_id)
            left = deadline - loop.time()
            if info.state in FINAL_STATES or info.state == "unknown" or left <= 0:
                return Ended(info.state, info.last_error, tuple(info.outputs))
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, MAX_POLL)

    async def close(self) -> None:
        await self.backend.close()


class MasterTarget:
    """Submits through a master (``POST .../tasks``), waits by its long polls."""

    def __init__(self, client: FleetClient) -> None:
        self.client = client

    async def push(self, automation_type: str, payload: Any, options: dict[str, Any]) -> str:
        def submit() -> str:
            return str(self.client.submit(automation_type, payload, **options)["task_id"])

        return await asyncio.to_thread(submit)

    async def ended(self, automation_type: str, task_id: str, wait: float) -> Ended:
        record = await asyncio.to_thread(self.client.wait_task, automation_type, task_id, wait)
        outputs = tuple(o for o in record.get("outputs") or () if isinstance(o, dict))
        return Ended(str(record.get("state")), record.get("last_error"), outputs)

    async def close(self) -> None:
        await asyncio.to_thread(self.client.close)


def _settings() -> Settings:
    try:
        return Settings()
    except ValidationError as exc:
        first = exc.errors()[0]
        name = "FLEET_" + "_".join(str(p) for p in first["loc"]).upper()
        raise ConfigError(f"invalid environment: {name}: {first['msg']}") from None


def _token(token: str | None) -> str | None:
    if token:
        return token
    env = _settings().admin_token
    if env:
        return env
    path = token_path()
    try:
        return read_token(path)
    except UnsafeTokenFile as exc:
        raise ClientError(f"not using the token file {path}: {exc}") from exc


async def open_target(backend: Any, master: str | None, token: str | None) -> Target:
    """The target of one submit (see the module's docstring for the choice).

    Args:
        backend: A backend URL, or None.
        master: A master URL, or None.
        token: The master's token (default ``FLEET_ADMIN_TOKEN``, then the token file).

    Raises:
        UnsupportedBackend, BackendUnavailable: The backend URL cannot be opened.
    """
    if backend is None and master is None:
        master = os.environ.get("FLEET_MASTER_URL") or None
    if master is not None:
        return MasterTarget(FleetClient(master, _token(token), timeout=MAX_WAIT_SECONDS + 30))
    url = backend if isinstance(backend, str) else _settings().backend_url
    return BackendTarget(await open_backend(url))
