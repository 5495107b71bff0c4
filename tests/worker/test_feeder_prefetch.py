"""The feeder's prefetch on the memory backend: while the queue is busy it holds
tasks ahead of the slots, hands them out without a backend call, and gives back
whatever no slot took within ``hold_seconds`` (or at close), attempt refunded."""

from __future__ import annotations

import asyncio

from fleet.backends.base import Backend
from fleet.worker.feeder import Feeder
from tests.worker.support import push, wait_until

T = "wt-prefetch"


def feeder(backend: Backend, prefetch: int, hold: float = 0.3) -> Feeder:
    return Feeder(
        backend.queues,
        T,
        lambda: (60.0, 3),
        block_seconds=0.5,
        prefetch=lambda: prefetch,
        hold_seconds=hold,
    )


async def processing(backend: Backend) -> int:
    return (await backend.queues.depths(T)).processing


async def test_busy_queue_holds_tasks_then_gives_them_back(mem: Backend) -> None:
    ids = await push(mem, T, *[{"n": i} for i in range(10)])
    f = feeder(mem, prefetch=4, hold=0.3)
    f.start()
    try:
        first = await asyncio.wait_for(f.get(), 5)
        assert first is not None and first.body.id == ids[0]

        async def held() -> bool:
            return await processing(mem) == 5

        await wait_until(held, timeout=5, what="four tasks held")
        # Nobody takes them: after hold_seconds they go back to the queue.

        async def given_back() -> bool:
            return await processing(mem) == 1

        await wait_until(given_back, timeout=5, what="held tasks given back")
    finally:
        await f.close()
    # The attempt charged at reserve was refunded: the next delivery is attempt 1.
    again = await mem.queues.reserve(T, k=9)
    assert sorted(r.body.id for r in again) == sorted(ids[1:])
    assert {r.body.attempt for r in again} == {1}


async def test_a_held_task_is_handed_out_at_once_in_queue_order(mem: Backend) -> None:
    ids = await push(mem, T, *[{"n": i} for i in range(10)])
    f = feeder(mem, prefetch=4, hold=5.0)
    f.start()
    try:
        first = await asyncio.wait_for(f.get(), 5)
        assert first is not None

        async def held() -> bool:
            return await processing(mem) == 5

        await wait_until(held, timeout=5, what="four tasks held")
        got = [await asyncio.wait_for(f.get(), 0.5) for _ in range(4)]
        assert [r.body.id for r in got if r is not None] == ids[1:5]
    finally:
        await f.close()


async def test_close_gives_back_held_tasks(mem: Backend) -> None:
    await push(mem, T, *[{"n": i} for i in range(10)])
    f = feeder(mem, prefetch=4, hold=30.0)
    f.start()
    first = await asyncio.wait_for(f.get(), 5)
    assert first is not None

    async def held() -> bool:
        return await processing(mem) == 5

    await wait_until(held, timeout=5, what="four tasks held")
    await f.close()
    assert await processing(mem) == 1  # only the task a slot took
    assert await f.get() is None


async def test_without_prefetch_or_with_a_short_queue_nothing_is_held(mem: Backend) -> None:
    await push(mem, T, *[{"n": i} for i in range(10)])
    f = feeder(mem, prefetch=0)
    f.start()
    try:
        assert await asyncio.wait_for(f.get(), 5) is not None
        await asyncio.sleep(0.2)
        assert await processing(mem) == 1
    finally:
        await f.close()
    # A queue with less than the slots ask for is not busy: no task is held.
    await mem.purge_type(T)
    await push(mem, T, {"n": 1})
    f = feeder(mem, prefetch=4)
    f.start()
    try:
        waits = [asyncio.ensure_future(f.get()) for _ in range(3)]
        done, _pending = await asyncio.wait(waits, timeout=5, return_when=asyncio.FIRST_COMPLETED)
        assert len(done) == 1 and next(iter(done)).result() is not None
        await push(mem, T, *[{"n": i} for i in range(10)])

        async def two_more() -> bool:
            return all(w.done() for w in waits)

        await wait_until(two_more, timeout=5, what="the two waiting slots served")
        # The reserve for two waiting slots got two: busy again, so up to four
        # are held on top; never more than that.
        await asyncio.sleep(0.1)
        assert await processing(mem) <= 3 + 4
    finally:
        await f.close()
