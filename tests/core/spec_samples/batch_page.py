"""The code samples of spec/batch-automation.md, as written there (plus stubs)."""
# ruff: noqa
from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel
from fleet.core import BaseConfig, BatchAutomation, register


@dataclass
class _Resp:
    status: int
    text: str


async def fetch(url: str, api_key: str) -> _Resp:
    return _Resp(status=200, text=f"{url}:{api_key}")


async def do_work(payload: object) -> None:
    return None


class MyConfig(BaseConfig):
    api_key: str

class ScrapeTask(BaseModel):
    url: str
    priority: int = 0

class ScrapeResult(BaseModel):
    url: str
    status: int
    body_len: int

@register("scraper")
class Scraper(BatchAutomation[MyConfig]):
    Config = MyConfig
    TaskPayload = ScrapeTask      # required for BatchAutomation
    Output = ScrapeResult         # optional — the type your stream emits

    async def run_one(self, task, ctx):
        # task.payload is a ScrapeTask instance, already validated
        resp = await fetch(task.payload.url, api_key=ctx.config.api_key)
        await ctx.emit(ScrapeResult(
            url=task.payload.url,
            status=resp.status,
            body_len=len(resp.text),
        ))


from fleet.core import Queue

SCRAPER = Queue[ScrapeTask]("scraper", payload=ScrapeTask)


async def submit_sample(ctx) -> None:
    await ctx.submit(SCRAPER, ScrapeTask(url="https://...", priority=5))


async def run_one_counter(self, task, ctx):
    inflight = ctx.counter("scraper:inflight")
    await inflight.incr()
    try:
        await do_work(task.payload)
    finally:
        await inflight.decr()


async def run_one_kv(task, ctx):
    await ctx.kv("scraper-inflight").set(task.id, ctx.worker_id, ttl_seconds=300)
    await ctx.kv("scraper-inflight").delete(task.id)


async def run_one_raise(self, task, ctx):
    await do_work(task.payload)  # just raise; the framework handles retries
