"""The automation the dashboard's browser tests drive (loaded with ``--plugin``).

A task echoes its text to the output stream, or fails on purpose when ``fail``
is set, so one type shows output, retries and dead letters.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register

TYPE = "dash-echo"


class EchoConfig(BaseConfig):
    """Adds a prefix to every echoed text."""

    prefix: str = Field(default="echo", max_length=20)


class EchoTask(BaseModel):
    """What to echo, and whether to fail instead."""

    text: str = Field(min_length=1, max_length=500, description="Text to echo.")
    fail: bool = Field(default=False, description="Raise instead of echoing.")


class EchoOut(BaseModel):
    """The echoed text."""

    text: str


@register(TYPE)
class DashEcho(BatchAutomation[EchoConfig]):
    """Echo a text to the stream, or fail."""

    Config = EchoConfig
    TaskPayload = EchoTask
    Output = EchoOut

    async def run_one(self, task: Task[EchoTask], ctx: Context[EchoConfig]) -> None:
        if task.payload.fail:
            raise RuntimeError(f"asked to fail: {task.payload.text}")
        await ctx.emit(EchoOut(text=f"{ctx.config.prefix}: {task.payload.text}"))
