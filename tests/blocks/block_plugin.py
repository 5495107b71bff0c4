"""``blk-fetch``: fetches a URL with ``ctx.http()`` (options from the payload) and emits
what came back; ``PassSolver`` gets past the local site's challenge by asking for its
pass cookie through the client that met it (tests/blocks/test_blocks_worker.py)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register
from fleet.core.access.solvers import Solution
from fleet.core.blocks import Challenge


class Fetch(BaseModel):
    url: str
    classify: bool = True
    skip_one: bool = False  # extensions={"fleet_classify": False}
    impersonate: str | None = None


class Fetched(BaseModel):
    url: str
    status: int
    user_agent: str
    exit: str = ""
    identity: str | None
    attempt: int


@register("blk-fetch")
class BlockFetch(BatchAutomation[BaseConfig]):
    TaskPayload = Fetch
    Output = Fetched

    async def run_one(self, task: Task[Fetch], ctx: Context[BaseConfig]) -> None:
        p = task.payload
        extensions = {"fleet_classify": False} if p.skip_one else None
        async with ctx.http(timeout=10, classify=p.classify, impersonate=p.impersonate) as http:
            response = await http.get(p.url, extensions=extensions)
        await ctx.emit(
            Fetched(
                url=p.url,
                status=response.status_code,
                user_agent=response.headers.get("x-seen-ua", ""),
                exit=response.headers.get("x-seen-exit", ""),
                identity=None if ctx.identity is None else ctx.identity.id,
                attempt=task.attempt,
            )
        )


class PassSolver:
    """Asks the site's ``/pass`` for the cookie that lets a client through."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.path = str(config.get("path", "/pass"))

    async def solve(self, challenge: Challenge) -> Solution | None:
        if challenge.client is None:
            return None
        root = challenge.url.split("/", 3)
        answer = await challenge.client.get(f"{root[0]}//{root[2]}{self.path}")
        value = answer.cookies.get("pass")
        if not value:
            return None
        host = root[2].split(":")[0]
        return Solution(cookies=[{"name": "pass", "value": value, "domain": host, "path": "/"}])
