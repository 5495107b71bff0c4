"""The latency benchmark's automation: records when ``run_one`` starts.

Each task's payload carries the producer's ``time.time()`` at submit; ``run_one``
appends ``start - submitted`` (seconds) to a Redis list, one RPUSH per task.
"""

from __future__ import annotations

import os
import time
from typing import Any

import redis.asyncio as aioredis
from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, register

LAT_KEY = os.environ.get("LAT_KEY", "bench:latency")
_client: aioredis.Redis | None = None


class Stamped(BaseModel):
    submitted: float


@register("latency")
class LatencyAutomation(BatchAutomation[BaseConfig]):
    """Pushes submit-to-start latency of each task to ``LAT_KEY``."""

    Config = BaseConfig
    TaskPayload = Stamped

    async def run_one(self, task: Any, ctx: Any) -> None:
        started = time.time()
        global _client
        if _client is None:
            _client = aioredis.Redis.from_url(os.environ["REDIS_URL"])
        await _client.rpush(LAT_KEY, repr(started - task.payload.submitted))
