"""Cancel requests that reach a worker before a slot took the task."""

from __future__ import annotations

from fleet.backends.base import Backend
from fleet.worker.cancels import PendingCancels
from tests.plugins_fixture.echo import EchoAutomation
from tests.worker.support import push, running_worker, wait_until

T = "wt-echo"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_request_is_taken_once() -> None:
    cancels = PendingCancels()
    cancels.add("a")
    assert not cancels.take("b")
    assert cancels.take("a")
    assert not cancels.take("a")
    assert len(cancels) == 0


def test_requests_expire_and_are_pruned() -> None:
    clock = Clock()
    cancels = PendingCancels(ttl=10.0, clock=clock)
    cancels.add("old")
    clock.now += 5
    cancels.add("young")
    clock.now += 6  # "old" is 11 s old, "young" 6 s
    assert not cancels.take("old")
    cancels.add("new")  # adding prunes what expired
    assert len(cancels) == 2
    clock.now += 5
    assert not cancels.take("young")
    assert cancels.take("new")


def test_the_oldest_requests_go_first_past_the_limit() -> None:
    cancels = PendingCancels(limit=2)
    for task_id in ("a", "b", "a", "c"):  # "a" again: it is the newest now
        cancels.add(task_id)
    assert len(cancels) == 2
    assert not cancels.take("b")
    assert cancels.take("a") and cancels.take("c")


async def test_a_cancel_heard_before_a_slot_took_the_task_is_honoured(mem: Backend) -> None:
    async with running_worker(mem, [EchoAutomation]) as worker:
        # The master published the cancel of a task this worker reserved, and no
        # slot runs it yet: the request is kept...
        await mem.events.publish(f"cancel.{T}", {"task_id": "early"})
        await wait_until(lambda: len(worker.runners[T].env.cancels) == 1, what="request kept")
        # ...and the slot that takes the task settles it without running it.
        (tid,) = await push(mem, T, {"n": 1}, task_id="early")
        (other,) = await push(mem, T, {"n": 2})

        async def settled() -> bool:
            states = [(await mem.queues.state(T, i)).state for i in (tid, other)]
            return states == ["done", "done"]

        await wait_until(settled, timeout=30, what="both tasks settled")
        assert await mem.counters.get(f"wt-echo:runs:{tid}") == 0
        assert await mem.counters.get(f"wt-echo:runs:{other}") == 1
        assert len(worker.runners[T].env.cancels) == 0
