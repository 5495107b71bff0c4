"""``proxy-fetch``: the proxy tests' automation. Each attempt fetches ``target`` through
``ctx.proxy_url`` (after ``ctx.proxy.sticky(key)`` when the task names a sticky key),
reports the proxy bad on a 403 (and fails, so the task is retried elsewhere) or ok
otherwise, and appends a line to the ledger named by ``FLEET_PROXY_LEDGER``: time, pid,
task, sticky key, the proxy's key, the HTTP status and the cool-down the report gave."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import httpx
from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register


class FetchTask(BaseModel):
    target: str
    sticky: str | None = None


def record(line: dict[str, Any]) -> None:
    path = os.environ.get("FLEET_PROXY_LEDGER")
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


@register("proxy-fetch")
class ProxyFetch(BatchAutomation[BaseConfig]):
    Config = BaseConfig
    TaskPayload = FetchTask

    async def run_one(self, task: Task[Any], ctx: Context[BaseConfig]) -> None:
        p: FetchTask = task.payload
        if p.sticky is not None:
            await ctx.proxy.sticky(p.sticky)
        url, key = ctx.proxy_url, ctx.proxy.key
        started = time.time()
        async with httpx.AsyncClient(proxy=url, timeout=10) as client:
            status = (await client.get(p.target)).status_code
        line = {"t0": started, "t": time.time(), "pid": os.getpid(), "task": task.id}
        line.update(sticky=p.sticky, proxy=key, status=status, attempt=task.attempt)
        if status == 403:
            await ctx.proxy.report_bad(f"403 from {p.target}")
            record(line)
            raise RuntimeError(f"blocked through {key}")
        await ctx.proxy.report_ok()
        record(line)
