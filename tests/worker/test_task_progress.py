"""Progress (issue 26, 3): ``ctx.progress`` through a real worker on every backend —
kept in the task's record with the task's outputs, the last report of a task
written when it ends — and the coalescing that keeps it cheap."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core import BaseConfig, BatchAutomation, Context, Task, register
from fleet.core.errors import ContractTypeError
from fleet.core.progress import ProgressReporter
from fleet.core.results import progress_topic
from tests.worker.support import push, running_worker, wait_until

TYPE = "wt-progress"


class Steps(BaseModel):
    n: int


class Row(BaseModel):
    step: int


@register(TYPE)
class Stepper(BatchAutomation[BaseConfig]):
    """Reports every step (far more often than the slot writes) and emits a row
    per step; fails its first attempt half-way."""

    Config = BaseConfig
    TaskPayload = Steps
    Output = Row

    async def run_one(self, task: Task[Any], ctx: Context[BaseConfig]) -> None:
        for step in range(1, task.payload.n + 1):
            await ctx.progress(step / task.payload.n, f"step {step}/{task.payload.n}")
            await ctx.emit(Row(step=step))
            if task.attempt == 1 and step == 2:
                raise RuntimeError("the page broke half-way")


async def test_progress_and_outputs_in_the_record(backend: Backend) -> None:
    sub = await backend.events.subscribe(progress_topic(TYPE))
    try:
        async with running_worker(backend, [Stepper]):
            (task_id,) = await push(backend, TYPE, {"n": 5}, max_attempts=3)

            async def ended() -> bool:
                info = await backend.queues.state(TYPE, task_id)
                return (
                    info.state == "done"
                    and info.progress is not None
                    and (info.progress["attempt"] == 2 and info.progress["fraction"] == 1.0)
                )

            await wait_until(ended, what="the task done with its last progress report")
            topic, event = await asyncio.wait_for(sub.__anext__(), 5)
    finally:
        await sub.aclose()
    assert topic == progress_topic(TYPE) and event["task_id"] == task_id
    info = await backend.queues.state(TYPE, task_id)
    assert info.progress is not None and info.progress["message"] == "step 5/5"
    assert [(o["attempt"], o["payload"]["step"]) for o in info.outputs] == [
        (1, 1), (1, 2), (2, 1), (2, 2), (2, 3), (2, 4), (2, 5)
    ]  # fmt: skip
    assert info.started_at is not None and info.submitted_at is not None
    assert info.finished_at is not None and info.started_at <= info.finished_at


class _Backend:
    """Records task_progress calls (the reporter's only backend call)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, float | None, str | None]] = []

    async def progress(
        self, automation_type: str, task_id: str, *, attempt: int, fraction: Any, message: Any
    ) -> None:
        self.calls.append((task_id, attempt, fraction, message))


async def test_reports_are_coalesced_and_the_last_one_flushed() -> None:
    fake = _Backend()
    clock = [100.0]
    reporter = ProgressReporter(fake, "t", interval=0.5, clock=lambda: clock[0])  # type: ignore[arg-type]
    await reporter.report(("a", 1, 0.1, None))  # the first goes out at once
    for i in range(2, 50):
        await reporter.report(("a", 1, i / 100, None))  # within the interval: kept
    assert fake.calls == [("a", 1, 0.1, None)]
    reporter.flush()  # the task ended
    await reporter.drain()
    assert fake.calls == [("a", 1, 0.1, None), ("a", 1, 0.49, None)]
    clock[0] += 1.0
    await reporter.report(("b", 1, None, "x"))
    assert fake.calls[-1] == ("b", 1, None, "x")


async def test_the_timer_sends_the_latest_report() -> None:
    fake = _Backend()
    reporter = ProgressReporter(fake, "t", interval=0.05)  # type: ignore[arg-type]
    await reporter.report(("a", 1, 0.1, None))
    await reporter.report(("a", 1, 0.2, None))
    await reporter.report(("a", 1, 0.3, None))
    await asyncio.sleep(0.15)
    await reporter.drain()
    assert fake.calls == [("a", 1, 0.1, None), ("a", 1, 0.3, None)]


async def test_bad_reports_are_refused() -> None:
    backend = await open_backend("memory://progress-refused")
    ctx: Context[BaseConfig] = Context(backend=backend, automation_type=TYPE, config=BaseConfig)
    try:
        with pytest.raises(ContractTypeError, match="inside run_one"):
            await ctx.progress(0.5)
        ctx.bind_task("a", 1)
        for fraction, message in [(None, None), (1.5, None), (-0.1, "x"), (None, "m" * 201)]:
            with pytest.raises(ValueError):
                await ctx.progress(fraction, message)
        with pytest.raises(ValueError):
            await ctx.progress(float("nan"))
        await ctx.progress(0.0, "m" * 200)  # the bounds themselves are fine
    finally:
        await backend.close()
