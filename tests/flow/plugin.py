"""``flow-job``: the flow-control tests' automation. Every attempt appends a line
to the ledger named by ``FLEET_FLOW_LEDGER`` when it starts and when it ends (time,
pid, group, attempt), so the tests measure concurrency and rate from the plugin's
own records. A task with ``throttle`` set raises ``Throttled(retry_after=throttle)``
on its first delivery (a marker file next to the ledger remembers it)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Context, Task, Throttled, register


class FlowTask(BaseModel):
    n: int
    ms: int = 20
    throttle: float | None = None


def record(event: str, task: Task[Any]) -> None:
    path = os.environ.get("FLEET_FLOW_LEDGER")
    if not path:
        return
    line = json.dumps(
        {
            "id": task.id,
            "ev": event,
            "t": time.time(),
            "pid": os.getpid(),
            "group": task.group,
            "attempt": task.attempt,
        }
    )
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def first_time(task_id: str) -> bool:
    """True the first time any process asks for this task (an exclusive create)."""
    marker = os.environ["FLEET_FLOW_LEDGER"] + f".throttled-{task_id}"
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return False
    return True


@register("flow-job")
class FlowJob(BatchAutomation[BaseConfig]):
    Config = BaseConfig
    TaskPayload = FlowTask

    async def run_one(self, task: Task[Any], ctx: Context[BaseConfig]) -> None:
        p: FlowTask = task.payload
        record("start", task)
        if p.throttle is not None and first_time(task.id):
            record("throttled", task)
            raise Throttled(retry_after=p.throttle)
        await asyncio.sleep(p.ms / 1000)
        record("end", task)
