"""``proxy-policy``: the automation of the fleet-wide proxy policy test. Each attempt,
on the proxy ``ensure()`` gave it, writes ``ready-<pid>`` into the directory named by
``FLEET_POLICY_GATE``, then holds its worker's event loop until a ``go`` file appears
there, then reports its proxy bad and appends to ``ledger.jsonl`` in that directory
the policy its handle held when it reported (this worker's copy of the config).

Holding the event loop (a blocking sleep, not ``asyncio.sleep``) is the point: while
it is held the worker reads no event and applies no config, so a PATCH made meanwhile
reaches the report only through the backend."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register
from tests.support.waits import until_sync

#: Longest hold before the attempt gives up (a test that never says go).
HOLD_SECONDS = 90.0


class PolicyTask(BaseModel):
    n: int


def _append(path: Path, line: dict[str, Any]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


def _hold_until(go: Path) -> None:
    """Block the calling thread (the worker's event loop) until ``go`` exists."""
    until_sync(go.exists, timeout=HOLD_SECONDS, interval=0.005, what=str(go))


@register("proxy-policy")
class ProxyPolicyJob(BatchAutomation[BaseConfig]):
    Config = BaseConfig
    TaskPayload = PolicyTask

    async def run_one(self, task: Task[Any], ctx: Context[BaseConfig]) -> None:
        gate = Path(os.environ["FLEET_POLICY_GATE"])
        handle = ctx.proxy
        (gate / f"ready-{os.getpid()}").write_text(str(task.payload.n))
        _hold_until(gate / "go")
        # Nothing awaited since the hold: the handle still carries this worker's copy.
        held = handle.policy
        line = {"pid": os.getpid(), "task": task.id, "proxy": handle.key, "at": time.time()}
        line.update(threshold=held.bad_threshold, cooldown=held.cooldown_seconds)
        line.update(same_handle=ctx.proxy is handle)
        _append(gate / "ledger.jsonl", line)
        await handle.report_bad("blocked (policy test)")
