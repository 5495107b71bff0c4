"""``cost-fetch``: fetches a URL with ``ctx.http()``, meters its own ``api_credits``
and emits the size it got (tests/costs)."""

from __future__ import annotations

from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register


class Fetch(BaseModel):
    url: str
    credits: float = 0
    fail: bool = False


class Got(BaseModel):
    url: str
    size: int


@register("cost-fetch")
class CostFetch(BatchAutomation[BaseConfig]):
    TaskPayload = Fetch
    Output = Got

    async def run_one(self, task: Task[Fetch], ctx: Context[BaseConfig]) -> None:
        async with ctx.http(timeout=10) as http:
            response = await http.get(task.payload.url)
        if task.payload.credits:
            await ctx.meter("api_credits", task.payload.credits)
        if task.payload.fail and task.attempt == 1:
            raise RuntimeError("the first attempt fails after its download")
        await ctx.emit(Got(url=task.payload.url, size=len(response.content)))


class RunSummary(BaseModel):
    run: dict[str, object]


class Report(BaseModel):
    run_id: str
    done: int


@register("cost-report")
class CostReport(BatchAutomation[BaseConfig]):
    """A run's ``on_complete``: emits the run's id and its done count."""

    TaskPayload = RunSummary
    Output = Report

    async def run_one(self, task: Task[RunSummary], ctx: Context[BaseConfig]) -> None:
        counters = task.payload.run["counters"]
        assert isinstance(counters, dict)
        await ctx.emit(Report(run_id=str(task.payload.run["run_id"]), done=counters["done"]))
