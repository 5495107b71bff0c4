"""Live config, reconcile, continuous slots and drain on the memory backend."""

from __future__ import annotations

import asyncio
from typing import Any

from fleet.backends.base import Backend
from fleet.core.config import BaseConfig
from tests.plugins_fixture.echo import EchoAutomation
from tests.plugins_fixture.loop import LoopAutomation
from tests.plugins_fixture.required import RequiredAutomation
from tests.worker.support import (
    drain,
    push,
    push_config,
    running_worker,
    state_of,
    wait_until,
)

E = "wt-echo"


async def done(backend: Backend, t: str, task_id: str) -> bool:
    return (await backend.queues.state(t, task_id)).state == "done"


async def test_config_push_changes_ctx_config_and_slot_count_live(mem: Backend) -> None:
    async with running_worker(mem, [EchoAutomation]) as worker:
        runner = worker.runners[E]
        assert len(runner.slots) == 1
        slots_before = dict(runner.slots)
        gen = await push_config(mem, E, {"slots": 3, "label": "b"}, ["w1"])
        await wait_until(lambda: len(runner.slots) == 3, what="3 slots")
        assert runner.held_gen == gen
        assert runner.slots[0] is slots_before[0]  # existing slots were not restarted
        (tid,) = await push(mem, E, {"n": 1})
        await wait_until(lambda: done(mem, E, tid), what="task done")
        (entry,) = await mem.streams.peek(E)
        assert entry.payload["label"] == "b"

        async def reported() -> bool:
            return (await state_of(mem, E, "w1")).get("applied_gen") == str(gen)

        await wait_until(reported, what="applied_gen reported")
        # scale down stops the newest slots
        await push_config(mem, E, {"slots": 1}, ["w1"])
        await wait_until(lambda: list(runner.slots) == [0], what="back to slot 0 only")


async def test_scale_down_lets_the_running_task_finish(mem: Backend) -> None:
    await mem.configs.set(E, {"slots": 2})
    async with running_worker(mem, [EchoAutomation]) as worker:
        runner = worker.runners[E]
        ids = await push(mem, E, {"n": 1, "sleep": 3.0}, {"n": 2, "sleep": 3.0})

        async def both_running() -> bool:
            counts = [await mem.counters.get(f"wt-echo:runs:{i}") for i in ids]
            return counts == [1, 1]

        await wait_until(both_running, what="both tasks running")
        await push_config(mem, E, {"slots": 1}, ["w1"])
        # Told to stop while its task still runs (3 s): it finishes it first.
        await wait_until(lambda: runner.slots[1].stopping, what="slot 1 stopping")
        assert runner.slots[1].stats.busy
        await wait_until(lambda: list(runner.slots) == [0], what="slot 1 ended")
        # both finish: slot 0's task ends at about the same time, and acks are
        # batched, so "done" may land a moment after the slot is gone
        for i in ids:
            await wait_until(lambda i=i: done(mem, E, i), what=f"task {i} done")


async def test_per_worker_override_and_proxy_change_reach_slots(mem: Backend) -> None:
    async with running_worker(mem, [EchoAutomation]) as worker:
        runner = worker.runners[E]
        await mem.configs.set(E, {"proxy_url": "http://override:1"}, "w1")
        gen = await push_config(mem, E, {"proxy_url": "http://typewide:1"}, ["w1"])
        await wait_until(lambda: runner.held_gen == gen, what="gen applied")
        (tid,) = await push(mem, E, {"n": 1})
        await wait_until(lambda: done(mem, E, tid), what="task done")
        await mem.configs.set(E, {}, "w1")
        await push_config(
            mem,
            E,
            {
                "proxy_provider": "template",
                "proxy_provider_config": {"template": "http://u-{session}-{country}:p@h:1"},
            },
            ["w1"],
        )
        await wait_until(lambda: runner.held_gen > gen, what="provider config applied")
        (tid2,) = await push(mem, E, {"n": 2})
        await wait_until(lambda: done(mem, E, tid2), what="task 2 done")
    first, second = await mem.streams.peek(E)
    assert first.payload["proxy"] == "http://override:1"
    assert (
        second.payload["proxy"].startswith("http://u-")
        and second.payload["proxy"] != "http://override:1"
    )


async def test_enabled_false_stops_slots_and_true_restarts_them(mem: Backend) -> None:
    async with running_worker(mem, [EchoAutomation]) as worker:
        runner = worker.runners[E]
        await push_config(mem, E, {"enabled": False}, ["w1"])
        await wait_until(lambda: not runner.slots, what="no slots")

        async def idle() -> bool:
            return (await state_of(mem, E, "w1")).get("state") == "IDLE"

        await wait_until(idle, what="IDLE state")
        (tid,) = await push(mem, E, {"n": 1})
        await asyncio.sleep(0.2)
        assert (await mem.queues.state(E, tid)).state == "queued"
        await push_config(mem, E, {"enabled": True}, ["w1"])
        await wait_until(lambda: done(mem, E, tid), what="task done after re-enable")


async def test_missing_required_field_is_error_until_a_valid_config(mem: Backend) -> None:
    t = "wt-required"
    async with running_worker(mem, [RequiredAutomation]) as worker:
        runner = worker.runners[t]
        state = await state_of(mem, t, "w1")
        assert state["state"] == "ERROR"
        assert state["last_error"] == "missing required config field(s): api_key"
        assert not runner.slots
        (tid,) = await push(mem, t, {"n": 1})
        await push_config(mem, t, {"api_key": "k-123"}, ["w1"])
        await wait_until(lambda: done(mem, t, tid), what="task done")

        async def running() -> bool:
            s = await state_of(mem, t, "w1")
            return s.get("state") == "RUNNING" and s.get("last_error") == ""

        await wait_until(running, what="RUNNING without error")
    (entry,) = await mem.streams.peek(t)
    assert entry.payload == {"api_key": "k-123"}


async def test_drain_and_resume(mem: Backend) -> None:
    async with running_worker(mem, [EchoAutomation]) as worker:
        runner = worker.runners[E]
        (slow,) = await push(mem, E, {"n": 1, "sleep": 0.5})

        async def started() -> bool:
            return await mem.counters.get(f"wt-echo:runs:{slow}") == 1

        await wait_until(started, what="slow task started")
        await drain(mem, E, "w1", True)

        async def draining() -> bool:
            return (await state_of(mem, E, "w1")).get("state") == "DRAINING"

        await wait_until(draining, what="DRAINING")
        (later,) = await push(mem, E, {"n": 2})
        await wait_until(lambda: done(mem, E, slow), what="in-flight task finished")
        await wait_until(lambda: not runner.slots, what="slots stopped")
        await asyncio.sleep(0.2)
        assert (await mem.queues.state(E, later)).state == "queued"
        await drain(mem, E, "w1", False)
        await wait_until(lambda: done(mem, E, later), what="task done after resume")


async def test_drain_flag_is_read_at_start(mem: Backend) -> None:
    await drain(mem, E, "w1", True)
    async with running_worker(mem, [EchoAutomation]) as worker:
        assert worker.runners[E].draining and not worker.runners[E].slots
        assert (await state_of(mem, E, "w1"))["state"] == "DRAINING"


async def test_continuous_slot_is_respawned_and_cleaned_up(mem: Backend) -> None:
    await mem.configs.set("wt-loop", {"mode": "raise", "slots": 2})
    async with running_worker(mem, [LoopAutomation]) as worker:

        async def respawned() -> bool:
            return await mem.counters.get("wt-loop:starts:1") >= 3

        await wait_until(respawned, what="3 starts of slot 1")
        stats = worker.runners["wt-loop"].slots[0].stats
        assert stats.failed >= 1
    for slot in (0, 1):
        starts = await mem.counters.get(f"wt-loop:starts:{slot}")
        assert await mem.counters.get(f"wt-loop:cleanups:{slot}") == starts


async def test_continuous_returning_slot_respawns_too(mem: Backend) -> None:
    await mem.configs.set("wt-loop", {"mode": "return"})
    async with running_worker(mem, [LoopAutomation]):

        async def respawned() -> bool:
            return await mem.counters.get("wt-loop:starts:0") >= 3

        await wait_until(respawned, what="3 starts")


async def test_recycle_restarts_old_slots_and_shutdown_reaches_run_slot(mem: Backend) -> None:
    await mem.configs.set("wt-loop", {"mode": "forever", "recycle_seconds": 0.3})
    async with running_worker(mem, [LoopAutomation], heartbeat_seconds=0.1):

        async def recycled() -> bool:
            return await mem.counters.get("wt-loop:starts:0") >= 3

        await wait_until(recycled, what="recycled twice")
    starts = await mem.counters.get("wt-loop:starts:0")
    assert await mem.counters.get("wt-loop:cleanups:0") == starts


async def test_stubborn_run_slot_is_cancelled_after_grace(mem: Backend) -> None:
    await mem.configs.set("wt-loop", {"mode": "stubborn"})
    async with running_worker(mem, [LoopAutomation], grace=0.2) as worker:

        async def started() -> bool:
            return await mem.counters.get("wt-loop:starts:0") == 1

        await wait_until(started, what="started")
    assert not worker.runners["wt-loop"].slots
    assert await mem.counters.get("wt-loop:cleanups:0") == 1


async def test_unknown_proxy_provider_is_a_config_error(mem: Backend) -> None:
    await mem.configs.set(E, {"proxy_provider": "nope"})
    async with running_worker(mem, [EchoAutomation]) as worker:
        state = await state_of(mem, E, "w1")
        assert state["state"] == "ERROR"
        assert state["last_error"].startswith("unknown proxy_provider 'nope'; known: ")
        assert "template" in state["last_error"]
        assert not worker.runners[E].slots


async def test_declared_browser_gives_every_slot_the_shared_pool(mem: Backend) -> None:
    from pydantic import BaseModel

    from fleet.browser import BrowserPool
    from fleet.core import BatchAutomation, register
    from fleet.core.automation import unregister
    from fleet.core.browser import BrowserNeeds

    seen: list[object] = []

    class P(BaseModel):
        n: int = 0

    @register("wt-browser")
    class WithBrowser(BatchAutomation[BaseConfig]):
        TaskPayload = P
        Browser = BrowserNeeds(size=1)

        async def run_one(self, task: Any, ctx: Any) -> None:
            seen.append(ctx.browser)

    @register("wt-browser-2")
    class AlsoBrowser(WithBrowser):
        pass

    try:
        async with running_worker(mem, [WithBrowser, AlsoBrowser]) as worker:
            tids = await push(mem, "wt-browser", {"n": 1}, {"n": 2})
            tids += await push(mem, "wt-browser-2", {"n": 3})
            for t, tid in zip(["wt-browser", "wt-browser", "wt-browser-2"], tids, strict=True):
                await wait_until(lambda t=t, tid=tid: done(mem, t, tid), what="task done")
            pools = list(worker.browsers.values())
        # one pool for one BrowserNeeds, shared by both types and every slot
        assert len(pools) == 1 and isinstance(pools[0], BrowserPool)
        assert seen == [pools[0]] * 3 and pools[0].needs == BrowserNeeds(size=1)
    finally:
        unregister("wt-browser")
        unregister("wt-browser-2")


async def test_automation_that_cannot_be_created_is_an_error(mem: Backend) -> None:
    from pydantic import BaseModel

    from fleet.core import BatchAutomation, register
    from fleet.core.automation import unregister

    class P(BaseModel):
        n: int = 0

    @register("wt-badinit")
    class BadInit(BatchAutomation[BaseConfig]):
        TaskPayload = P

        def __init__(self) -> None:
            raise OSError("no such device")

        async def run_one(self, task: Any, ctx: Any) -> None:
            raise AssertionError("never runs")

    try:
        async with running_worker(mem, [BadInit]) as worker:
            state = await state_of(mem, "wt-badinit", "w1")
            assert state["state"] == "ERROR"
            assert state["last_error"] == "BadInit() raised OSError: no such device"
            await push_config(mem, "wt-badinit", {"slots": 2}, ["w1"])
            await asyncio.sleep(0.1)
            assert not worker.runners["wt-badinit"].slots
    finally:
        unregister("wt-badinit")
