"""Time limits (issue 26, 4): ``timeout_seconds`` of the config or of the task cuts a
``run_one`` off; the attempt fails with ``TaskTimeout`` and is retried like any failure,
then dead-lettered, while the neighbours in the other slots run on. A run that ignores
its cancel loses its slot after the grace period, and a fresh slot takes over. On every
backend, through a real worker."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from fleet.backends.base import Backend
from fleet.browser.engines import BrowserEngine
from fleet.core import BaseConfig, BatchAutomation, Context, Task, TaskTimeout, register
from fleet.core.browser import BrowserNeeds
from fleet.core.errors import ContractValueError
from fleet.core.records import TaskBody
from fleet.core.submission import make_push_request
from fleet.master.services.metrics import MasterMetrics
from fleet.worker import limits
from fleet.worker.agent import Worker
from fleet.worker.limits import effective_limit
from fleet.worker.slots import DEFAULT_GRACE_SECONDS, timeout_grace
from tests.worker.support import push, running_worker, wait_until

TYPE = "wt-time-limits"


class Job(BaseModel):
    n: int = 0
    mode: str = "sleep"  # sleep | hang | slow_stop | stubborn
    sleep: float = 0.0


class LimitConfig(BaseConfig):
    slots: int = 3
    max_attempts: int = 2
    timeout_seconds: float | None = 0.3


class Record:
    """What the runs did, in order (reset by the ``record`` fixture)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any, float]] = []
        self.running: dict[int, str] = {}  # slot -> the task its last run_one ran
        self.cleaned: list[str] = []
        self.release = False  # lets a stubborn run end
        self.stubborn_ended = False

    def add(self, what: str, key: Any) -> None:
        self.events.append((what, key, time.monotonic()))

    def times(self, what: str) -> list[float]:
        return [t for w, _k, t in self.events if w == what]


REC = Record()


@pytest.fixture
def record() -> Iterator[Record]:
    global REC
    REC = Record()
    yield REC
    REC.release = True  # a stubborn run left behind ends with its test


@register(TYPE)
class Limited(BatchAutomation[LimitConfig]):
    Config = LimitConfig
    TaskPayload = Job

    async def run_one(self, task: Task[Any], ctx: Context[LimitConfig]) -> None:
        rec = REC
        rec.running[ctx.slot_id] = task.id
        job = task.payload
        if job.mode == "hang":
            rec.add("start", (task.id, task.attempt))
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                rec.add("cancelled", (task.id, task.attempt))
                raise
        elif job.mode == "slow_stop":  # takes its time to undo, within the grace period
            rec.add("start", (task.id, task.attempt))
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                rec.add("cancelled", (task.id, task.attempt))
                await asyncio.sleep(0.4)
                rec.add("undone", (task.id, task.attempt))
                raise
        elif job.mode == "stubborn":
            await _stubborn(rec)
        else:
            await asyncio.sleep(job.sleep)
            rec.add("done", job.n)

    async def cleanup(self, ctx: Context[LimitConfig]) -> None:
        task_id = REC.running.pop(ctx.slot_id, None)
        if task_id is not None:
            REC.cleaned.append(task_id)


async def _stubborn(rec: Record) -> None:
    """A run that swallows every cancel until its test lets it go."""
    rec.add("start", "stubborn")
    try:
        while not rec.release:
            try:
                await asyncio.sleep(0.02)
            except asyncio.CancelledError:
                rec.add("ignored", "stubborn")
    finally:
        rec.stubborn_ended = True


class _Context:
    """A browser context of the fake engine: its closes are counted."""

    closed = 0

    async def new_page(self) -> object:
        return object()

    async def close(self) -> None:
        type(self).closed += 1


class _Browser:
    def is_connected(self) -> bool:
        return True

    async def new_context(self, **options: Any) -> _Context:
        return _Context()

    async def close(self) -> None:
        pass


class FakeEngine(BrowserEngine):
    """Browsers without a browser: what the pool needs to hand out pages."""

    name = "fake"

    async def launch(self, needs: BrowserNeeds, *, args: list[str], marker: str) -> Any:
        return _Browser()


BROWSER_TYPE = "wt-time-limits-browser"


class BrowserConfig(BaseConfig):
    max_attempts: int = 2
    timeout_seconds: float | None = 0.3


@register(BROWSER_TYPE)
class LimitedPage(BatchAutomation[BrowserConfig]):
    """Hangs with a browser page in hand."""

    Config = BrowserConfig
    TaskPayload = Job
    Browser = BrowserNeeds(size=1, max_uses=100)

    async def run_one(self, task: Task[Any], ctx: Context[BrowserConfig]) -> None:
        async with ctx.browser.acquire():
            REC.add("page", (task.id, task.attempt))
            await asyncio.sleep(60)


def _counters(worker: Worker) -> Any:
    return worker.runners[TYPE].env.counters


async def _state(backend: Backend, task_id: str) -> str:
    return (await backend.queues.state(TYPE, task_id)).state


async def _wait_states(backend: Backend, want: dict[str, str], what: str) -> None:
    async def reached() -> bool:
        return all([await _state(backend, t) == s for t, s in want.items()])

    await wait_until(reached, timeout=20.0, what=what)


async def test_a_task_past_its_limit_is_dead_lettered_while_its_neighbours_run_on(
    backend: Backend, record: Record
) -> None:
    async with running_worker(backend, [Limited]) as worker:
        (hung,) = await push(backend, TYPE, {"mode": "hang"})
        quick = await push(backend, TYPE, *({"n": n, "sleep": 0.05} for n in range(10)))
        want = {hung: "dead", **dict.fromkeys(quick, "done")}
        await _wait_states(backend, want, "the hung task dead, its neighbours done")
        counters = _counters(worker)
        assert (counters.timed_out, counters.dead, counters.retried) == (2, 1, 1)
        assert counters.slots_abandoned == 0
    # Both attempts ran, were cancelled at the limit, and their slot's cleanup ran.
    starts = [k for w, k, _t in record.events if w == "start"]
    assert starts == [(hung, 1), (hung, 2)]
    assert [k for w, k, _t in record.events if w == "cancelled"] == starts
    assert record.cleaned.count(hung) == 2
    # The neighbours ran while the hung task held its slot.
    first_start, first_cancel = record.times("start")[0], record.times("cancelled")[0]
    assert first_cancel - first_start >= 0.25
    assert any(first_start < t < first_cancel for t in record.times("done"))
    # The task's state and its dead letter say why, and where the run was.
    info = await backend.queues.state(TYPE, hung)
    assert info.attempt == 2
    assert info.last_error == "TaskTimeout: run_one exceeded timeout_seconds=0.3"
    (dead,) = await backend.queues.dead_peek(TYPE)
    assert dead.id == hung and dead.last_error == info.last_error
    assert dead.traceback is not None and "run_one" in dead.traceback


async def test_a_tasks_own_limit_wins_over_the_configs(backend: Backend, record: Record) -> None:
    async with running_worker(backend, [Limited]) as worker:
        (short,) = await push(backend, TYPE, {"mode": "hang"}, timeout_seconds=0.1)
        (long,) = await push(backend, TYPE, {"n": 1, "sleep": 0.6}, timeout_seconds=5)
        (plain,) = await push(backend, TYPE, {"n": 2, "sleep": 5}, max_attempts=1)
        want = {short: "dead", long: "done", plain: "dead"}
        await _wait_states(backend, want, "the per-task limits applied")
        assert _counters(worker).timed_out == 3  # short twice, plain once
    short_info = await backend.queues.state(TYPE, short)
    assert short_info.attempt == 2  # the redelivered attempt kept the task's own limit
    assert short_info.last_error == "TaskTimeout: run_one exceeded timeout_seconds=0.1"
    # A task without a limit of its own has the config's.
    plain_info = await backend.queues.state(TYPE, plain)
    assert plain_info.last_error == "TaskTimeout: run_one exceeded timeout_seconds=0.3"
    assert set(record.cleaned) >= {short, long, plain}


async def test_a_run_ignoring_its_cancel_loses_its_slot_to_a_fresh_one(
    backend: Backend, record: Record, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEET_TIMEOUT_GRACE_SECONDS", "0.2")
    async with running_worker(backend, [Limited]) as worker:
        runner = worker.runners[TYPE]
        assert runner.env.timeout_grace == 0.2
        await wait_until(lambda: len(runner.slots) == 3, what="three slots")
        before = dict(runner.slots)
        (stubborn,) = await push(backend, TYPE, {"mode": "stubborn"}, max_attempts=1)
        await _wait_states(backend, {stubborn: "dead"}, "the stubborn task dead")
        assert _counters(worker).slots_abandoned == 1
        assert record.times("ignored"), "the run was cancelled (and ignored it)"
        assert not record.stubborn_ended  # still running, detached
        # Capacity stays: a fresh slot replaced the one given up.
        await wait_until(
            lambda: (
                len(runner.slots) == 3
                and sum(s not in before.values() for s in runner.slots.values()) == 1
            ),
            what="a fresh slot in place of the given-up one",
        )
        quick = await push(backend, TYPE, *({"n": n, "sleep": 0.02} for n in range(9)))
        await _wait_states(backend, dict.fromkeys(quick, "done"), "the next tasks done")
        frame = runner.stats(0.0, 0)
        assert frame["tasks"]["slots_abandoned"] == 1 and frame["tasks"]["timed_out"] == 1
        await _exported(backend, "w1", timed_out=1, abandoned=1)
    info = await backend.queues.state(TYPE, stubborn)
    assert info.last_error is not None and info.last_error.startswith("TaskTimeout: ")
    assert stubborn in record.cleaned  # the given-up slot's cleanup still ran
    record.release = True
    await wait_until(lambda: record.stubborn_ended and not limits._abandoned, what="run ended")


async def test_a_run_past_its_limit_gives_its_browser_page_back(
    mem: Backend, record: Record, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("fleet.browser.pool.engine_class", lambda name: FakeEngine)
    _Context.closed = 0
    async with running_worker(mem, [LimitedPage]) as worker:
        (task_id,) = await push(mem, BROWSER_TYPE, {"mode": "hang"})

        async def dead() -> bool:
            return (await mem.queues.state(BROWSER_TYPE, task_id)).state == "dead"

        await wait_until(dead, what="the task dead after two attempts past the limit")
        (pool,) = worker.browsers.values()
        assert [k for w, k, _t in record.events if w == "page"] == [(task_id, 1), (task_id, 2)]
        # Each attempt's page went back: its browser context closed, none in use.
        assert (pool.acquired, pool.in_use, _Context.closed) == (2, 0, 2)
    info = await mem.queues.state(BROWSER_TYPE, task_id)
    assert info.last_error == "TaskTimeout: run_one exceeded timeout_seconds=0.3"


async def _exported(backend: Backend, worker_id: str, *, timed_out: int, abandoned: int) -> None:
    """The worker's stats frame reports both counters, and /metrics exports them."""

    async def reported() -> bool:
        record = await backend.workers.get(TYPE, worker_id)
        tasks = ((record.stats or {}) if record is not None else {}).get("tasks", {})
        return bool(tasks.get("slots_abandoned") == abandoned)

    await wait_until(reported, what="slots_abandoned in the stats frame")
    text = (await MasterMetrics().render(backend, heartbeat_seconds=0.2)).decode()
    labels = f'{{type="{TYPE}",worker="{worker_id}"}}'
    assert f"fleet_worker_tasks_timed_out_total{labels} {float(timed_out)}" in text
    assert f"fleet_worker_slots_abandoned_total{labels} {float(abandoned)}" in text


async def test_a_run_that_stops_within_the_grace_period_keeps_its_slot(
    mem: Backend, record: Record
) -> None:
    async with running_worker(mem, [Limited]) as worker:
        runner = worker.runners[TYPE]
        await wait_until(lambda: len(runner.slots) == 3, what="three slots")
        before = dict(runner.slots)
        (task_id,) = await push(mem, TYPE, {"mode": "slow_stop"}, max_attempts=1)
        await wait_until(lambda: bool(record.times("cancelled")), what="the limit's cancel")
        # Past its limit the outcome is the timeout: a cancel now is kept for later.
        assert not runner.cancel_task(task_id)
        await _wait_states(mem, {task_id: "dead"}, "the task dead")
        assert record.times("undone")[0] < record.times("cancelled")[0] + 5
        assert (_counters(worker).timed_out, _counters(worker).slots_abandoned) == (1, 0)
        assert runner.slots == before  # no slot given up
    info = await mem.queues.state(TYPE, task_id)
    assert info.last_error == "TaskTimeout: run_one exceeded timeout_seconds=0.3"
    assert record.cleaned == [task_id]


async def test_a_cancel_reaches_a_run_under_a_limit(mem: Backend, record: Record) -> None:
    async with running_worker(mem, [Limited]) as worker:
        (task_id,) = await push(mem, TYPE, {"mode": "hang"}, timeout_seconds=30)
        await wait_until(lambda: bool(record.times("start")), what="the run started")
        assert worker.runners[TYPE].cancel_task(task_id)
        await _wait_states(mem, {task_id: "done"}, "the cancelled task acked")
        assert _counters(worker).timed_out == 0
    assert [k for w, k, _t in record.events if w == "cancelled"] == [(task_id, 1)]
    assert record.cleaned == [task_id]


def test_the_limit_is_validated_and_kept_with_the_task() -> None:
    bads: tuple[Any, ...] = (0, -1, math.inf, math.nan, True, "5")
    for bad in bads:
        with pytest.raises(ContractValueError) as info:
            make_push_request({}, timeout_seconds=bad)
        assert info.value.field == "timeout_seconds"
    body = make_push_request({}, timeout_seconds=2).body
    assert body.timeout_seconds == 2.0
    again = TaskBody.from_json(body.to_json())
    assert again.timeout_seconds == 2.0
    assert "timeout_seconds" not in make_push_request({}).body.to_dict()
    for bad_config in (0, -2, math.inf):
        with pytest.raises(ValidationError):
            BaseConfig(timeout_seconds=bad_config)
    assert BaseConfig().timeout_seconds is None
    assert str(TaskTimeout("run_one exceeded timeout_seconds=1")).startswith("run_one exceeded")


def test_the_error_names_the_limit_as_given() -> None:
    assert limits.timed_out(0.3, None).error == "TaskTimeout: run_one exceeded timeout_seconds=0.3"
    assert str(limits.timed_out(1234567.0, None).error).endswith("timeout_seconds=1234567")
    assert limits.timed_out(2.5, "stack").traceback == "stack"


def test_which_limit_applies_and_the_grace_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert effective_limit(None, None) is None
    assert effective_limit(None, 3.0) == 3.0
    assert effective_limit(1, 3.0) == 1.0
    # A stored body holding nonsense falls back on the config's limit.
    for nonsense in ("x", -1, 0, math.inf, True):
        assert effective_limit(nonsense, 3.0) == 3.0
    monkeypatch.delenv("FLEET_TIMEOUT_GRACE_SECONDS", raising=False)
    assert timeout_grace() == DEFAULT_GRACE_SECONDS
    monkeypatch.setenv("FLEET_TIMEOUT_GRACE_SECONDS", "0")
    assert timeout_grace() == 0.0
    for bad in ("-1", "soon", "inf"):
        monkeypatch.setenv("FLEET_TIMEOUT_GRACE_SECONDS", bad)
        assert timeout_grace() == DEFAULT_GRACE_SECONDS
