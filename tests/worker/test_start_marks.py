"""Start marks: the lease keeper tells the backend which tasks started, in batches the
slots never wait for; a suspect (a task lost unstarted with a worker before) starts
only once its mark landed, and alone among its type's suspects on the worker."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from fleet.backends.base import Backend
from fleet.core import BaseConfig, BatchAutomation, Context, Task, clock, register
from fleet.worker.leases import LeaseKeeper
from fleet.worker.slots import SUSPECT_PROBATION_SECONDS
from tests.worker.support import push, running_worker, wait_until

T = "wt-marks"

#: (event, task id, monotonic time) of every run step, and of every mark call.
JOURNAL: list[tuple[str, str, float]] = []


class MarksTask(BaseModel):
    sleep: float = 0.0


@register(T)
class MarksAutomation(BatchAutomation[BaseConfig]):
    TaskPayload = MarksTask

    async def run_one(self, task: Task[Any], ctx: Context[BaseConfig]) -> None:
        JOURNAL.append(("start", task.id, time.monotonic()))
        await asyncio.sleep(task.payload.sleep)
        JOURNAL.append(("end", task.id, time.monotonic()))


def record_marks(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Wrap ``mark_started``: every call's task ids, in order (and in JOURNAL)."""
    calls: list[list[str]] = []
    real = backend.queues.mark_started

    async def mark_started(
        automation_type: str, leases: Sequence[tuple[str, str]], **kw: Any
    ) -> list[bool]:
        calls.append([task_id for task_id, _ in leases])
        answers = await real(automation_type, leases, **kw)
        for (task_id, _), ok in zip(leases, answers, strict=True):
            if ok:
                JOURNAL.append(("marked", task_id, time.monotonic()))
        return answers

    monkeypatch.setattr(backend.queues, "mark_started", mark_started)
    return calls


async def make_suspects(backend: Backend, ids: list[str]) -> None:
    """Let reservations of ``ids`` die unmarked with their "worker": each gets refunds=1.

    The clock stops a second back for it and moves past the leases' end, so what the
    sweep writes lies in the past of the real clock the worker runs on afterwards."""
    with clock.frozen(time.time() - 1) as stopped:
        got = await backend.queues.reserve(T, k=len(ids), visibility_seconds=0.05)
        assert sorted(r.body.id for r in got) == sorted(ids)
        stopped.advance(0.1)
        assert await backend.queues.sweep(T) == len(ids)


async def test_marks_of_tasks_started_together_go_in_one_call(
    mem: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = record_marks(mem, monkeypatch)
    ids = await push(mem, T, *({} for _ in range(5)))
    got = await mem.queues.reserve(T, k=5)
    keeper = LeaseKeeper(mem.queues, T)
    keeper.start()
    lost: list[str] = []
    try:
        for r in got:
            keeper.track(r.body.id, r.token, 60.0, lambda _: None, lost.append)
        keeper.untrack(got[0].body.id, got[0].token)  # finished before its mark went out
        stale = keeper.track(ids[0], "not-the-token", 60.0, lambda _: None, lost.append)
        assert calls == []  # track() never waits for the backend
        await wait_until(lambda: bool(calls), what="the marks sent")
        await asyncio.sleep(0.05)
        assert calls == [[r.body.id for r in got[1:]] + [ids[0]]]
        assert lost == [ids[0]] and stale.lost  # a stale mark: the lease is lost
        # A confirmed mark waits for the backend's answer.
        (extra,) = await push(mem, T, {})
        (r,) = await mem.queues.reserve(T)
        lease = keeper.track(extra, r.token, 60.0, lambda _: None, lost.append, started=False)
        assert await keeper.mark_confirmed(lease) is True
        bad = keeper.track(extra, "stale", 60.0, lambda _: None, lost.append, started=False)
        assert await keeper.mark_confirmed(bad) is False
        assert bad.lost and keeper.get(extra) is lease and lost == [ids[0]]
    finally:
        await keeper.close()


async def test_a_busy_worker_marks_in_batches(
    mem: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = record_marks(mem, monkeypatch)
    await mem.configs.set(T, {"slots": 10})
    ids = await push(mem, T, *({"sleep": 0.01} for _ in range(300)))
    async with running_worker(mem, [MarksAutomation]):

        async def all_done() -> bool:
            return (await mem.queues.depths(T)).counters.completed == len(ids)

        await wait_until(all_done, timeout=30, what="all tasks done")
    marked = [tid for call in calls for tid in call]
    assert len(set(marked)) == len(marked) <= len(ids)
    assert len(calls) <= len(ids) // 3, len(calls)  # never one call per task


async def test_suspects_start_alone_and_only_once_marked(
    mem: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    JOURNAL.clear()
    calls = record_marks(mem, monkeypatch)
    await mem.configs.set(T, {"slots": 4})
    hold = SUSPECT_PROBATION_SECONDS / 4
    suspects = await push(mem, T, {"sleep": hold}, {"sleep": hold}, {"sleep": hold})
    await make_suspects(mem, suspects)
    fresh = await push(mem, T, {"sleep": hold})
    async with running_worker(mem, [MarksAutomation]):

        async def all_done() -> bool:
            return (await mem.queues.depths(T)).counters.completed == 4

        await wait_until(all_done, timeout=10, what="all tasks done")
    at = {(ev, tid): t for ev, tid, t in JOURNAL}
    for tid in suspects:
        assert at[("marked", tid)] <= at[("start", tid)], "a suspect ran before its mark landed"
    # One suspect at a time: each starts after the one before it ended.
    runs = sorted((at[("start", tid)], at[("end", tid)]) for tid in suspects)
    for (_, end), (start, _) in itertools.pairwise(runs):
        assert start >= end
    # A fresh task does not wait for them (and is marked after it started).
    assert at[("start", fresh[0])] < runs[-1][0]
    assert sorted(tid for call in calls for tid in call) == sorted(suspects + fresh)
    for tid in suspects + fresh:
        info = await mem.queues.state(T, tid)
        assert (info.state, info.attempt) == ("done", 1)
