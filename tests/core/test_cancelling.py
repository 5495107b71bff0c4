"""``cancel_and_wait``: a task that loses a cancel still stops."""

from __future__ import annotations

import asyncio

import pytest

from fleet.core.cancelling import cancel_and_wait
from tests.support.waits import until


async def _swallows_one_cancel(ticks: list[int]) -> None:
    # What asyncio.wait_for does on 3.11 when its call finishes as the cancel comes:
    # the cancel is lost and the loop carries on into its sleep.
    lost = False
    while True:
        try:
            await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            if lost:
                raise
            lost = True
        ticks.append(1)


async def test_a_lost_cancel_is_sent_again() -> None:
    ticks: list[int] = []
    task = asyncio.create_task(_swallows_one_cancel(ticks))
    await until(lambda: ticks, what="the task's loop to run")
    # one cancel alone would leave it running for ever
    async with asyncio.timeout(5):
        assert await cancel_and_wait(task, again_after=0.05) is None
    assert task.cancelled()


async def test_a_single_cancel_is_not_enough_for_such_a_task() -> None:
    ticks: list[int] = []
    task = asyncio.create_task(_swallows_one_cancel(ticks))
    await until(lambda: ticks, what="the task's loop to run")
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=0.3)
    assert not done  # the case cancel_and_wait exists for
    await cancel_and_wait(task)


async def test_the_result_or_the_error_of_a_finished_task_comes_back() -> None:
    async def ends(value: int) -> int:
        return value

    async def fails() -> None:
        raise RuntimeError("boom")

    task = asyncio.create_task(ends(7))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert await cancel_and_wait(task) == 7
    failing = asyncio.create_task(fails())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="boom"):
        await cancel_and_wait(failing)
