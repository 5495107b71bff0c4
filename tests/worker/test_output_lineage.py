"""Outputs know their task (issue 26, 1): every stream entry carries the task id and
the attempt that emitted it, so a consumer can drop the outputs of an attempt that
failed and ran again. On every backend, through a real worker and the typed reader."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from fleet.backends.base import Backend
from fleet.core import BaseConfig, BatchAutomation, Context, Stream, Task, register
from fleet.core.handles import StreamHandle
from tests.worker.support import push, running_worker, wait_until

TYPE = "wt-lineage"


class Page(BaseModel):
    n: int


class Row(BaseModel):
    n: int
    part: int


@register(TYPE)
class TwoRows(BatchAutomation[BaseConfig]):
    """Emits a first row, then fails on its first attempt; the second attempt emits
    both rows again: the first attempt's row is a redelivery's leftover."""

    Config = BaseConfig
    TaskPayload = Page
    Output = Row

    async def run_one(self, task: Task[Any], ctx: Context[BaseConfig]) -> None:
        await ctx.emit(Row(n=task.payload.n, part=1))
        if task.attempt == 1:
            raise RuntimeError("the page broke half-way")
        await ctx.emit(Row(n=task.payload.n, part=2))


async def test_a_redelivered_tasks_outputs_tell_their_attempts_apart(backend: Backend) -> None:
    async with running_worker(backend, [TwoRows]):
        (task_id,) = await push(backend, TYPE, {"n": 7}, max_attempts=3)

        async def done() -> bool:
            return (await backend.queues.state(TYPE, task_id)).state == "done"

        await wait_until(done, what="the task done on its second attempt")
    entries = await backend.streams.read(TYPE, n=10)
    seen = [(e.task_id, e.attempt, e.payload["part"]) for e in entries]
    assert seen == [(task_id, 1, 1), (task_id, 2, 1), (task_id, 2, 2)]
    assert all(e.worker_id == "w1" for e in entries)
    # The output of the attempt that counted: the task's last attempt.
    final = max(e.attempt or 0 for e in entries)
    assert [e.payload["part"] for e in entries if e.attempt == final] == [1, 2]
    # The typed reader of another automation sees the same lineage.
    typed = await StreamHandle(backend.streams, Stream[Row](TYPE, payload=Row)).read(n=10)
    assert [(e.task_id, e.attempt, e.payload.part) for e in typed] == seen
    # Every way to read an entry back carries it: tail, peek, pop, the JSON form.
    assert [(e.task_id, e.attempt) for e in await backend.streams.tail(TYPE, 3)] == [
        (t, a) for t, a, _ in seen
    ]
    (first,) = await backend.streams.pop(TYPE, 1)
    assert first.to_dict()["task_id"] == task_id and first.to_dict()["attempt"] == 1


async def test_emits_outside_a_task_carry_no_task(backend: Backend) -> None:
    entry = await backend.streams.push(TYPE, {"n": 1, "part": 1}, worker_id="loop")
    assert (entry.task_id, entry.attempt) == (None, None)
    (read,) = await backend.streams.read(TYPE, n=1)
    assert (read.task_id, read.attempt) == (None, None)
    assert read.to_dict()["task_id"] is None
