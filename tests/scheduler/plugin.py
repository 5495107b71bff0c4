"""``sched-proc``: the schedule process tests' automation. It declares one schedule
firing every second, and every run appends a ledger line (task id, pid, time) to the
file named by ``FLEET_SCHED_LEDGER``."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Context, Schedule, Task, register


class Tick(BaseModel):
    label: str


@register("sched-proc")
class SchedProc(BatchAutomation[BaseConfig]):
    Config = BaseConfig
    TaskPayload = Tick
    Schedules = [Schedule(id="every-second", every=1, payload=Tick(label="tick"))]

    async def run_one(self, task: Task[Any], ctx: Context[BaseConfig]) -> None:
        path = os.environ.get("FLEET_SCHED_LEDGER")
        if not path:
            return
        line = json.dumps({"id": task.id, "pid": os.getpid(), "t": time.time()})
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)
