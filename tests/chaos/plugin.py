"""``chaos-job``: the chaos suite's automation. Every attempt writes a line to the
ledger file named by ``FLEET_CHAOS_LEDGER`` when it starts and when it finishes (before
its ack), so the suite counts executions from the plugin's own records, whatever the
backend says; ``poison`` kills its process the way an OOM or a segfault would."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register


class ChaosTask(BaseModel):
    n: int
    ms: int = 20
    poison: bool = False


def record(event: str, task: Task[Any]) -> None:
    """One ledger line, appended in one write (whole lines even from many processes)."""
    path = os.environ.get("FLEET_CHAOS_LEDGER")
    if not path:
        return
    line = json.dumps({"id": task.id, "attempt": task.attempt, "pid": os.getpid(), "ev": event})
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


@register("chaos-job")
class ChaosJob(BatchAutomation[BaseConfig]):
    Config = BaseConfig
    TaskPayload = ChaosTask

    async def run_one(self, task: Task[Any], ctx: Context[BaseConfig]) -> None:
        record("start", task)
        p: ChaosTask = task.payload
        if p.poison:
            os._exit(137)  # what the kernel's OOM killer leaves of a process
        await asyncio.sleep(p.ms / 1000)
        record("end", task)
