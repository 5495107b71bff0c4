"""Batch slots on the in-process memory backend: retries, DLQ, validation,
cleanup, cancel, shutdown release, heartbeat stats."""

from __future__ import annotations

import asyncio

from fleet.backends.base import Backend
from tests.plugins_fixture.echo import EchoAutomation
from tests.worker.support import push, push_config, running_worker, state_of, wait_until

T = "wt-echo"


async def runs(backend: Backend, task_id: str) -> int:
    return await backend.counters.get(f"wt-echo:runs:{task_id}")


async def task_state(backend: Backend, task_id: str) -> str:
    return (await backend.queues.state(T, task_id)).state


async def test_retries_then_success(mem: Backend) -> None:
    async with running_worker(mem, [EchoAutomation]) as worker:
        (tid,) = await push(mem, T, {"n": 1, "fail_times": 2})

        async def done() -> bool:
            return await task_state(mem, tid) == "done"

        await wait_until(done, what="task done")
        counters = worker.runners[T].env.counters
        assert (counters.failed, counters.retried, counters.completed) == (2, 2, 1)
    assert await runs(mem, tid) == 3
    (entry,) = await mem.streams.peek(T, 10)
    assert entry.payload["attempt"] == 3 and entry.worker_id == "w1"


async def test_dead_letter_after_max_attempts_keeps_error_and_traceback(mem: Backend) -> None:
    await mem.configs.set(T, {"max_attempts": 2})
    async with running_worker(mem, [EchoAutomation]) as worker:
        (tid,) = await push(mem, T, {"n": 1, "fail_times": 99})

        async def dead() -> bool:
            return await task_state(mem, tid) == "dead"

        await wait_until(dead, what="task dead")
        assert worker.runners[T].env.counters.dead == 1
    (body,) = await mem.queues.dead_peek(T)
    assert body.attempt == 2 and body.max_attempts == 2
    assert body.last_error == "RuntimeError: planned failure 2"
    assert body.traceback is not None and "run_one" in body.traceback
    assert "planned failure 2" in body.traceback
    assert await runs(mem, tid) == 2


async def test_per_task_max_attempts_wins(mem: Backend) -> None:
    async with running_worker(mem, [EchoAutomation]):
        (tid,) = await push(mem, T, {"n": 1, "fail_times": 99}, max_attempts=1)

        async def dead() -> bool:
            return await task_state(mem, tid) == "dead"

        await wait_until(dead, what="task dead")
    assert await runs(mem, tid) == 1


async def test_invalid_payload_goes_straight_to_the_dlq(mem: Backend) -> None:
    async with running_worker(mem, [EchoAutomation]):
        (tid,) = await push(mem, T, {"n": "not a number"})

        async def dead() -> bool:
            return await task_state(mem, tid) == "dead"

        await wait_until(dead, what="task dead")
    (body,) = await mem.queues.dead_peek(T)
    assert body.attempt == 1  # not retried
    assert body.last_error is not None
    assert "invalid payload for wt-echo" in body.last_error and "n\n" in body.last_error
    assert await runs(mem, tid) == 0  # run_one never saw it


async def test_many_tasks_each_run_exactly_once_and_cleanup_always_runs(mem: Backend) -> None:
    await mem.configs.set(T, {"slots": 4})
    async with running_worker(mem, [EchoAutomation]) as worker:
        ids = await push(
            mem, T, *[{"n": i, "fail_times": 1 if i % 10 == 0 else 0} for i in range(60)]
        )

        async def all_done() -> bool:
            return worker.runners[T].env.counters.completed == 60

        await wait_until(all_done, what="60 tasks completed")
        await worker.runners[T].env.acker.flush()  # type: ignore[union-attr]
        assert len(worker.runners[T].slots) == 4
    entries = await mem.streams.peek(T, 100)
    assert sorted(e.payload["n"] for e in entries) == list(range(60))
    assert {e.payload["slot"] for e in entries} == {0, 1, 2, 3}
    total_runs = sum([await runs(mem, i) for i in ids])
    assert total_runs == 66  # 6 tasks failed once
    assert await mem.counters.get("wt-echo:cleanups") == total_runs
    depths = await mem.queues.depths(T)
    assert depths.counters.completed == 60 and depths.processing == 0


async def test_cancel_event_stops_a_running_task(mem: Backend) -> None:
    async with running_worker(mem, [EchoAutomation]):
        (tid,) = await push(mem, T, {"n": 1, "sleep": 30})

        async def started() -> bool:
            return await runs(mem, tid) == 1

        await wait_until(started, what="task started")
        assert await mem.queues.cancel(T, tid) == "cancelling"
        await mem.events.publish(f"cancel.{T}", {"task_id": tid})

        async def cancelled() -> bool:
            return await task_state(mem, tid) == "cancelled"

        await wait_until(cancelled, timeout=5, what="task cancelled")
        assert await mem.counters.get("wt-echo:cleanups") == 1


async def test_shutdown_after_grace_gives_the_task_back(mem: Backend) -> None:
    async with running_worker(mem, [EchoAutomation], grace=0.3) as worker:
        (tid,) = await push(mem, T, {"n": 1, "sleep": 30})

        async def started() -> bool:
            return await runs(mem, tid) == 1

        await wait_until(started, what="task started")
    info = await mem.queues.state(T, tid)
    assert info.state == "queued" and info.attempt == 0  # attempt refunded
    assert await mem.counters.get("wt-echo:cleanups") == 1
    assert (await state_of(mem, T, "w1"))["state"] == "STOPPED"
    assert worker.runners[T].slots == {}


async def test_shutdown_waits_for_a_task_within_grace(mem: Backend) -> None:
    async with running_worker(mem, [EchoAutomation], grace=5) as worker:
        (tid,) = await push(mem, T, {"n": 1, "sleep": 0.5})

        async def started() -> bool:
            return await runs(mem, tid) == 1

        await wait_until(started, what="task started")
        worker.request_stop()
    assert await task_state(mem, tid) == "done"


async def test_registration_heartbeat_and_stats(mem: Backend) -> None:
    async with running_worker(mem, [EchoAutomation], heartbeat_seconds=0.1) as worker:
        await push(mem, T, {"n": 1}, {"n": 2})

        async def stats_seen() -> bool:
            rec = await mem.workers.get(T, "w1")
            return bool(rec and rec.stats and rec.stats["tasks"]["completed"] == 2)

        await wait_until(stats_seen, what="stats frame with 2 completed")
        rec = await mem.workers.get(T, "w1")
        assert rec is not None and rec.stats is not None
        assert rec.hardware["cpu_count"] >= 1 and rec.hardware["pid"] > 0
        assert rec.state["state"] == "RUNNING" and rec.state["slots"] == "1"
        assert rec.state["applied_gen"] == str(worker.runners[T].held_gen) != "0"
        assert float(rec.state["last_seen"]) > 0
        assert rec.stats["slots"] == {"busy": 0, "total": 1}
        assert rec.stats["rss_bytes"] > 0
        assert rec.stats["slot_stats"][0]["completed"] == 2
        assert await mem.workers.ids(T) == ["w1"]
        assert (T, "w1") in await mem.workers.all()
        assert (await mem.catalog.get(T) or {})["kind"] == "BatchAutomation"
        # a forgotten live worker registers again on its next heartbeat
        await mem.workers.forget(T, "w1")

        async def back() -> bool:
            return await mem.workers.ids(T) == ["w1"]

        await wait_until(back, what="re-registration")


async def test_lost_backend_generation_is_written_back(mem: Backend) -> None:
    async with running_worker(mem, [EchoAutomation]) as worker:
        gen = await push_config(mem, T, {"label": "z"}, ["w1"])
        runner = worker.runners[T]
        await wait_until(lambda: runner.held_gen == gen, what="gen applied")
        await mem.workers.forget(T, "w1")  # wipes wkr:...:config and :gen
        await worker.resync()
        assert await mem.configs.desired(T, "w1") == ({"label": "z"}, gen)


async def test_stale_push_is_ignored(mem: Backend) -> None:
    async with running_worker(mem, [EchoAutomation]) as worker:
        runner = worker.runners[T]
        held = runner.held_gen
        await mem.events.publish(f"config.{T}", {"worker_id": None, "gen": held})
        await asyncio.sleep(0.1)
        assert runner.held_gen == held


async def test_cancel_without_event_is_seen_at_lease_renewal(mem: Backend) -> None:
    # visibility 10 s: the slot renews after ~3.3 s and learns of the cancel then
    await mem.configs.set(T, {"visibility_seconds": 10})
    async with running_worker(mem, [EchoAutomation]):
        (tid,) = await push(mem, T, {"n": 1, "sleep": 30})

        async def started() -> bool:
            return await runs(mem, tid) == 1

        await wait_until(started, what="task started")
        assert await mem.queues.cancel(T, tid) == "cancelling"  # no cancel.<type> event

        async def cancelled() -> bool:
            return await task_state(mem, tid) == "cancelled"

        await wait_until(cancelled, timeout=30, what="task cancelled at renewal")
