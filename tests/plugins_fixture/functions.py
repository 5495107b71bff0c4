"""Function tasks (``@task``) for the tests: a plain return, a model return, none,
one that wants ``ctx``, one that fails on demand and one that waits."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from fleet.core import Context, task


class Title(BaseModel):
    url: str
    title: str


@task(slots=3, max_attempts=2)
async def ft_shout(word: str, times: int = 2) -> str:
    """Say it louder."""
    if word == "boom":
        raise RuntimeError(f"asked to fail: {word}")
    return " ".join([word.upper()] * times)


@task(name="ft-title")
async def fetch_title(url: str) -> Title:
    return Title(url=url, title=url.rsplit("/", 1)[-1])


@task
async def ft_quiet(n: int) -> None:
    del n


@task(max_attempts=1)
async def ft_with_ctx(label: str, ctx: Context) -> dict[str, str]:
    return {"label": label, "type": ctx.automation_type, "worker": ctx.worker_id}


@task(max_attempts=1)
async def ft_slow(seconds: float) -> float:
    await asyncio.sleep(seconds)
    return seconds
