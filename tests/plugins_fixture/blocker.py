"""``wt-blocker``: a batch automation that blocks its event loop on purpose
(``time.sleep`` or a CPU loop), or waits politely (``asyncio.sleep``)."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Literal

from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register


class BlockTask(BaseModel):
    mode: Literal["sleep", "spin", "await"] = "sleep"
    seconds: float = 1.0


class BlockConfig(BaseConfig):
    slots: int = 2
    max_attempts: int = 1
    timeout_seconds: float | None = 1.0


def spin(seconds: float) -> int:
    """Burn the CPU for ``seconds`` without yielding."""
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
    return n


@register("wt-blocker")
class Blocker(BatchAutomation[BlockConfig]):
    Config = BlockConfig
    TaskPayload = BlockTask

    async def run_one(self, task: Task[Any], ctx: Context[BlockConfig]) -> None:
        job = task.payload
        if job.mode == "sleep":
            time.sleep(job.seconds)  # noqa: ASYNC251 - blocks the loop: the mistake on purpose
        elif job.mode == "spin":
            spin(job.seconds)
        else:
            await asyncio.sleep(job.seconds)
