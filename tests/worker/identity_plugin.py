"""``wt-ident``: visits a URL with ``ctx.identity.http()`` and emits what the site saw
(the identity, its User-Agent, the cookie it sent); a payload may ask to report the
identity blocked (once per identity id listed)."""

from __future__ import annotations

from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Context, ContinuousAutomation, Task, register


class Visit(BaseModel):
    url: str
    block_ids: list[str] = []


class Seen(BaseModel):
    identity: str
    user_agent: str
    cookie: str
    attempt: int


@register("wt-ident")
class IdentityVisitor(BatchAutomation[BaseConfig]):
    TaskPayload = Visit
    Output = Seen

    async def run_one(self, task: Task[Visit], ctx: Context[BaseConfig]) -> None:
        assert ctx.identity is not None, "the type's config names an identity pool"
        http = ctx.http(timeout=5)
        response = await http.get(task.payload.url)
        seen = response.json()
        if ctx.identity.id in task.payload.block_ids:
            await ctx.identity.blocked("the site asked for a captcha")
        await ctx.emit(
            Seen(
                identity=ctx.identity.id,
                user_agent=seen["ua"],
                cookie=seen["cookie"],
                attempt=task.attempt,
            )
        )


class Hold(BaseModel):
    url: str
    hold: float = 0.2


class Held(BaseModel):
    identity: str
    exit: str
    user_agent: str
    cookie: str
    started: float
    ended: float
    worker: str


@register("wt-ident-hold")
class IdentityHolder(BatchAutomation[BaseConfig]):
    """Holds its identity ``hold`` seconds around one request, and says when."""

    TaskPayload = Hold
    Output = Held

    async def run_one(self, task: Task[Hold], ctx: Context[BaseConfig]) -> None:
        import asyncio
        import time

        assert ctx.identity is not None
        started = time.time()
        response = await ctx.http(timeout=10).get(task.payload.url)
        seen = response.json()
        await asyncio.sleep(task.payload.hold)
        await ctx.emit(
            Held(
                identity=ctx.identity.id,
                exit=seen["exit"],
                user_agent=seen["ua"],
                cookie=seen["cookie"],
                started=started,
                ended=time.time(),
                worker=ctx.worker_id,
            )
        )


class Round(BaseModel):
    identity: str
    user_agent: str


class RoundsConfig(BaseConfig):
    url: str = ""


@register("wt-ident-rounds")
class IdentityRounds(ContinuousAutomation[RoundsConfig]):
    """Each round of its loop holds an identity (``ctx.use_identity``) for one request."""

    Config = RoundsConfig
    Output = Round

    async def run_slot(self, ctx: Context[RoundsConfig]) -> None:
        import asyncio

        while not ctx.shutdown.is_set():
            async with ctx.use_identity() as identity:
                seen = (await ctx.http(timeout=5).get(ctx.config.url)).json()
                await ctx.emit(Round(identity=identity.id, user_agent=seen["ua"]))
            assert ctx.identity is None  # only within the round
            await asyncio.sleep(0.05)
