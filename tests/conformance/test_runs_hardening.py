"""Conformance: runs keep their types apart, check what enters them and expire when
idle (issue 40; docs/runs.md "The rules"), on every backend.

- ``unique_key`` belongs to a (run, type) pair;
- a task of a run is not delayed past the run's ``max_delay_seconds``;
- ids that are not run ids are unknown runs (never an error of the store);
- ``on_complete.type`` must be a type name;
- a running run with nothing moving expires after ``FLEET_RUN_IDLE_TTL_SECONDS``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core.clock import ManualClock
from fleet.core.config import BaseConfig
from fleet.core.context import Context
from fleet.core.contracts import Queue
from fleet.core.errors import ContractValueError, UnsupportedBackend
from fleet.core.records import PushRequest, TaskBody, new_id, now
from fleet.core.runs import DEFAULT_MAX_DELAY, callback_task_id
from fleet.core.submission import make_push_request
from tests.conformance.helpers import TYPE, elapse
from tests.support.waits import until

OTHER = "conf-other"
CB = "conf-callback"


@pytest.fixture
async def runs_backend(backend: Backend) -> AsyncIterator[Backend]:
    try:
        await backend.runs.page()
    except UnsupportedBackend:
        pytest.skip("runs are not supported on this backend yet")
    yield backend


def request(run: str, *, unique: str | None = None, delay: float = 0.0) -> PushRequest:
    body = TaskBody(id=new_id(), payload={"n": 1}, enqueued_at=now(), run=run)
    return PushRequest(body, delay, unique_key=unique)


async def counters(b: Backend, run: str) -> dict[str, int]:
    rec = await b.runs.get(run)
    assert rec is not None
    return {k: v for k, v in rec.counters.items() if v}


# ------------------------------------------------------------------ unique keys


async def test_unique_keys_belong_to_a_run_and_a_type(runs_backend: Backend) -> None:
    b = runs_backend
    run = await b.runs.create()
    first = await b.queues.push(TYPE, [request(run, unique="https://x/1")])
    other_type = await b.queues.push(OTHER, [request(run, unique="https://x/1")])
    again = await b.queues.push(TYPE, [request(run, unique="https://x/1")])
    again_other = await b.queues.push(OTHER, [request(run, unique="https://x/1")])
    assert first[0].queued and other_type[0].queued  # one key, two types: both queued
    assert again[0].duplicate and not again[0].queued
    assert again_other[0].duplicate and not again_other[0].queued
    rec = await b.runs.get(run)
    assert rec is not None
    assert rec.by_type[TYPE]["submitted"] == 1 and rec.by_type[TYPE]["duplicates"] == 1
    assert rec.by_type[OTHER]["submitted"] == 1 and rec.by_type[OTHER]["duplicates"] == 1


# ------------------------------------------------------------------ max delay


async def test_a_task_of_a_run_is_not_delayed_past_its_max_delay(runs_backend: Backend) -> None:
    b = runs_backend
    run = await b.runs.create(max_delay_seconds=60)
    rec = await b.runs.get(run)
    assert rec is not None and rec.max_delay_seconds == 60
    late = await b.queues.push(TYPE, [request(run, delay=61)])
    assert not late[0].queued and not late[0].duplicate and late[0].refused == "delay"
    assert await counters(b, run) == {}
    ok = await b.queues.push(TYPE, [request(run, delay=60)])
    assert ok[0].queued and ok[0].refused is None
    assert await counters(b, run) == {"submitted": 1, "pending": 1}


async def test_the_default_max_delay_is_a_day(runs_backend: Backend) -> None:
    b = runs_backend
    run = await b.runs.create()
    rec = await b.runs.get(run)
    assert rec is not None and rec.max_delay_seconds == DEFAULT_MAX_DELAY == 86_400
    year = await b.queues.push(TYPE, [request(run, delay=31_536_000)])
    assert not year[0].queued and year[0].refused == "delay"


async def test_ctx_submit_past_the_max_delay_raises(runs_backend: Backend) -> None:
    b = runs_backend
    run = await b.runs.create(max_delay_seconds=5)
    ctx: Context[BaseConfig] = Context(
        backend=b, automation_type=TYPE, config=BaseConfig.model_construct
    )
    ctx.bind_task("parent", 1, run=run)
    queue = Queue(OTHER, payload=BaseConfig)
    with pytest.raises(ContractValueError, match="max_delay_seconds") as caught:
        await ctx.submit(queue, BaseConfig(), delay_seconds=6)
    assert caught.value.field == "delay_seconds"
    assert await ctx.submit(queue, BaseConfig(), delay_seconds=5)
    assert (await counters(b, run))["submitted"] == 1


# ------------------------------------------------------------------ types


async def test_a_run_keeps_the_types_it_names(runs_backend: Backend) -> None:
    b = runs_backend
    named = await b.runs.create(types=(OTHER, TYPE))
    unnamed = await b.runs.create()
    rec = await b.runs.get(named)
    assert rec is not None and rec.types == (OTHER, TYPE)
    assert rec.to_dict()["types"] == [OTHER, TYPE]
    plain = await b.runs.get(unnamed)
    assert plain is not None and plain.types is None and plain.to_dict()["types"] is None
    with pytest.raises(ContractValueError):
        await b.runs.create(types=("a b/../x",))


# ------------------------------------------------------------------ ids


async def test_what_is_not_a_run_id_is_an_unknown_run(runs_backend: Backend) -> None:
    b = runs_backend
    run = await b.runs.create()
    assert (await b.queues.push(TYPE, [request(run)]))[0].queued  # it has live tasks now
    for bad in (f"{run}:live", f"{run}:keys:0", run.upper(), "*", run[:-1], ""):
        assert await b.runs.get(bad) is None
        assert await b.runs.cancel(bad) is None
    body = TaskBody(id=new_id(), payload={}, enqueued_at=now(), run=f"{run}:live")
    refused = await b.queues.push(TYPE, [PushRequest(body)])
    assert not refused[0].queued and not refused[0].duplicate
    assert await counters(b, run) == {"submitted": 1, "pending": 1}


def test_submits_may_not_name_a_malformed_run_or_take_a_callback_id() -> None:
    with pytest.raises(ContractValueError, match="run id") as bad_run:
        make_push_request({}, run="abc:live")
    assert bad_run.value.field == "run"
    with pytest.raises(ContractValueError, match="'run-'") as taken:
        make_push_request({}, task_id=callback_task_id(new_id()))
    assert taken.value.field == "task_id"
    # Idempotency keys are not task ids: only schedule: is reserved there.
    assert make_push_request({}, idempotency_key="run-1").idempotency_key == "run-1"


async def test_ctx_submit_may_not_take_a_callback_id(runs_backend: Backend) -> None:
    b = runs_backend
    run = await b.runs.create(on_complete={"type": CB})
    ctx: Context[BaseConfig] = Context(
        backend=b, automation_type=TYPE, config=BaseConfig.model_construct
    )
    ctx.bind_task("parent", 1, run=run)
    with pytest.raises(ContractValueError, match="callbacks of runs"):
        await ctx.submit(Queue(CB, payload=BaseConfig), BaseConfig(), task_id=callback_task_id(run))


# ------------------------------------------------------------------ on_complete


@pytest.mark.parametrize("bad", ["sec-cb:counters", "a b/../x", "*", "", "x" * 129])
async def test_on_complete_type_must_be_a_type_name(runs_backend: Backend, bad: str) -> None:
    with pytest.raises(ContractValueError) as caught:
        await runs_backend.runs.create(on_complete={"type": bad, "payload": {}})
    assert caught.value.field == "on_complete.type"


# ------------------------------------------------------------------ idle expiry


@pytest.fixture
async def idle_backend(
    runs_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Backend]:
    monkeypatch.setenv("FLEET_RUN_IDLE_TTL_SECONDS", "0.6")
    # A backend opened now has the setting (Redis scripts take it at load).
    b = await open_backend(runs_backend.url)
    try:
        yield b
    finally:
        await b.close()


async def test_a_run_never_started_expires(idle_backend: Backend, frozen: ManualClock) -> None:
    b = idle_backend
    run = await b.runs.create(on_complete={"type": CB})
    assert await b.runs.get(run) is not None
    await elapse(b, frozen, 0.9)  # on Redis an idle run's hash expires (PEXPIRE)
    assert await b.runs.get(run) is None
    assert run not in [r.id for r in (await b.runs.page(limit=50)).runs]
    refused = await b.queues.push(TYPE, [request(run)])
    assert not refused[0].queued


async def test_a_run_that_moves_lives_and_expires_once_idle(
    idle_backend: Backend, frozen: ManualClock
) -> None:
    b = idle_backend
    run = await b.runs.create()
    await b.queues.push(TYPE, [request(run, unique="k")])
    for _ in range(3):  # 1.2 s in all, never idle 0.6 s
        await elapse(b, frozen, 0.4)
        got = (await b.queues.reserve(TYPE, k=1))[0]
        await b.queues.release(TYPE, got.body.id, got.token)
    assert await counters(b, run) == {"submitted": 1, "pending": 1}
    again = await b.queues.push(TYPE, [request(run, unique="k")])
    assert again[0].duplicate  # its keys lived with it
    await elapse(b, frozen, 0.9)
    await b.queues.sweep(TYPE)
    assert await b.runs.get(run) is None
    # The task goes on without its run: its moves find no run to count.
    got = (await b.queues.reserve(TYPE, k=1))[0]
    await b.queues.ack(TYPE, [(got.body.id, got.token)])
    assert await b.runs.get(run) is None


async def test_a_delayed_task_keeps_its_run_until_it_is_due(
    idle_backend: Backend, frozen: ManualClock
) -> None:
    b = idle_backend
    run = await b.runs.create()
    assert (await b.queues.push(TYPE, [request(run, delay=1.0)]))[0].queued
    await elapse(b, frozen, 1.2)  # idle 0.6 s past creation, but its task is due at 1 s
    assert await counters(b, run) == {"submitted": 1, "pending": 1}
    got = await until(lambda: b.queues.reserve(TYPE, k=1), what="the due task")
    await b.queues.ack(TYPE, [(got[0].body.id, got[0].token)])
    rec = await b.runs.get(run)
    assert rec is not None and rec.state == "done"


async def test_on_complete_is_capped_like_a_task_payload(runs_backend: Backend) -> None:
    big = {"type": CB, "payload": {"x": "y" * (1 << 20)}}
    with pytest.raises(ContractValueError, match="bytes") as caught:
        await runs_backend.runs.create(on_complete=big)
    assert caught.value.field == "on_complete.payload"
