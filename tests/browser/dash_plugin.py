"""The automation the dashboard's browser tests drive (loaded with ``--plugin``).

A task echoes its text to the output stream, or fails on purpose: always with
``fail``, or only the first time a text is seen with ``fail_first`` (so a task
dead-lettered with ``max_attempts=1`` succeeds once it is replayed). Each echo
is also put into a pool, for the pools view.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from fleet.core import BaseConfig, BatchAutomation, Context, Pool, Task, register

TYPE = "dash-echo"
POOL = "dash-echoes"


class EchoConfig(BaseConfig):
    """Adds a prefix to every echoed text."""

    prefix: str = Field(default="echo", max_length=20)


class EchoTask(BaseModel):
    """What to echo, and whether to fail instead."""

    text: str = Field(min_length=1, max_length=500, description="Text to echo.")
    fail: bool = Field(default=False, description="Raise instead of echoing.")
    fail_first: bool = Field(default=False, description="Raise the first time this text is seen.")
    extra: int = Field(default=0, ge=0, le=100, description="Emit this many more outputs.")
    pad: int = Field(default=0, ge=0, le=20_000, description="Emit one output this long first.")


class EchoOut(BaseModel):
    """The echoed text."""

    text: str


class EchoTags(BaseModel):
    """The queryable part of a pooled echo."""

    length: int


ECHOES = Pool[EchoOut, EchoTags](POOL, payload=EchoOut, tags=EchoTags)


@register(TYPE)
class DashEcho(BatchAutomation[EchoConfig]):
    """Echo a text to the stream, or fail."""

    Config = EchoConfig
    TaskPayload = EchoTask
    Output = EchoOut
    Pools = {"echoes": ECHOES}

    async def run_one(self, task: Task[EchoTask], ctx: Context[EchoConfig]) -> None:
        if task.payload.fail:
            raise RuntimeError(f"asked to fail: {task.payload.text}")
        if task.payload.fail_first and await ctx.kv(TYPE).setnx(task.payload.text, True):
            raise RuntimeError(f"first attempt fails: {task.payload.text}")
        out = EchoOut(text=f"{ctx.config.prefix}: {task.payload.text}")
        await ctx.pool(ECHOES).put(payload=out, tags=EchoTags(length=len(out.text)))
        if task.payload.pad:
            await ctx.emit(EchoOut(text="p" * task.payload.pad))
        await ctx.emit(out)
        for i in range(task.payload.extra):
            await ctx.emit(EchoOut(text=f"extra {i}"))
