"""Three batch types for the adaptive slots test, one worker running them all:

* ``as-cpu``: burns the CPU on the event loop for ``burn`` seconds (a parser that
  never awaits);
* ``as-io``: one GET of a slow local endpoint (``url``): waiting, not working;
* ``as-429``: one GET of a local site that may answer 429 (``Throttled``).
"""

from __future__ import annotations

import time
from typing import Any

import httpx
from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register
from fleet.core.errors import Throttled


class Burn(BaseModel):
    burn: float = 0.02


class Fetch(BaseModel):
    url: str


@register("as-cpu")
class CpuBound(BatchAutomation[BaseConfig]):
    Config = BaseConfig
    TaskPayload = Burn

    async def run_one(self, task: Task[Any], ctx: Context[BaseConfig]) -> None:
        end = time.perf_counter() + task.payload.burn
        n = 0
        while time.perf_counter() < end:
            n += 1  # never yields: every other slot and type waits meanwhile


class _Fetcher(BatchAutomation[BaseConfig]):
    Config = BaseConfig
    TaskPayload = Fetch

    def __init__(self) -> None:
        # Enough connections for max_slots requests at once.
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
        self.client = httpx.AsyncClient(timeout=30, limits=limits)

    async def run_one(self, task: Task[Any], ctx: Context[BaseConfig]) -> None:
        r = await self.client.get(task.payload.url)
        if r.status_code == 429:
            raise Throttled(0.5, "the site answered 429")
        r.raise_for_status()


@register("as-io")
class IoBound(_Fetcher):
    pass


@register("as-429")
class Throttling(_Fetcher):
    pass
