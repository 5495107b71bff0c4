"""The benchmark's automation: one ``INCR`` per task, like every peer's job."""

from __future__ import annotations

import os
from typing import Any

import redis.asyncio as aioredis
from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, register

DONE_KEY = os.environ.get("DONE_KEY", "peerbench:done")
_client: aioredis.Redis | None = None


class Noop(BaseModel):
    i: int = 0


@register("noop")
class NoopAutomation(BatchAutomation[BaseConfig]):
    """Counts each task with one INCR on the benchmark's Redis."""

    Config = BaseConfig
    TaskPayload = Noop

    async def run_one(self, task: Any, ctx: Any) -> None:
        global _client
        if _client is None:
            _client = aioredis.Redis.from_url(os.environ["REDIS_URL"])
        await _client.execute_command("INCR", DONE_KEY)


# More types of the same job (bench/cluster_drain.py spreads its types over a cluster):
# NOOP_TYPES=noop1,noop2 registers each under its own name.
for _extra in filter(None, os.environ.get("NOOP_TYPES", "").split(",")):
    register(_extra)(type(f"Noop_{_extra}", (NoopAutomation,), {}))
