"""A run's unique keys on Redis: a scalable Bloom filter (lua/run_common.lua).

Every repeat is caught; distinct keys are refused by mistake at most at the
documented rate (2 in a billion: none expected here); the filter grows level by level,
each level a string of its final size; it is deleted when the run ends."""

from __future__ import annotations

import redis.asyncio as aioredis

from fleet.backends.redis import RedisBackend
from fleet.core.submission import make_push_request

TYPE = "run-keys"
N = 6000


async def _push(rb: RedisBackend, run: str, start: int, n: int) -> tuple[int, int]:
    reqs = [
        make_push_request({"i": i}, run=run, unique_key=f"https://example.com/{i}")
        for i in range(start, start + n)
    ]
    queued = dupes = 0
    for at in range(0, n, 500):
        for res in await rb.queues.push(TYPE, reqs[at : at + 500]):
            queued += res.queued
            dupes += res.duplicate
    return queued, dupes


async def test_unique_keys_in_a_bloom_filter(rb: RedisBackend, redis_url: str) -> None:
    run = await rb.runs.create()
    queued, false_dupes = await _push(rb, run, 0, N)
    assert queued + false_dupes == N
    assert false_dupes == 0, false_dupes  # 2^-29 documented: 1 in 90,000 runs of this test
    _, repeats = await _push(rb, run, 0, N)
    assert repeats == N
    record = await rb.runs.get(run)
    assert record is not None and record.counters["duplicates"] == N + false_dupes
    r = aioredis.from_url(redis_url, decode_responses=True)
    try:
        levels = int(await r.hget(f"fleet:run:{run}", "kl") or 0)
        assert levels == 3  # 1,024 + 2,048 + (4,096 of which 2,928 used)
        sizes = [await r.strlen(f"fleet:run:{run}:keys:{i}") for i in range(levels)]
        assert sizes == [5544, 11453, 23641]  # ceil(m / 8) of each level
        while got := await rb.queues.reserve(TYPE, k=500):
            await rb.queues.ack(TYPE, [(x.body.id, x.token) for x in got])
        record = await rb.runs.get(run)
        assert record is not None and record.state == "done"
        assert not await r.exists(*(f"fleet:run:{run}:keys:{i}" for i in range(levels)))
    finally:
        await r.aclose()


async def test_a_cancelled_runs_task_popped_before_its_own_cancel_is_dropped(
    rb: RedisBackend,
) -> None:
    """Run cancel on Redis is two steps: run_cancel.lua ends the run and answers its
    live tasks, then cancel.lua cancels each. A worker's reserve in between must not
    start one of them: reserve.lua drops a task of a cancelled run as cancelled."""
    from fleet.backends.redis import keys
    from fleet.core.records import now

    run = await rb.runs.create()
    await rb.queues.push(TYPE, [make_push_request({"i": i}, run=run) for i in range(3)])
    # The first step alone, as if the master stopped right after it.
    answer = await rb._scripts.run_cancel(rb._lane, [keys.run(run)], [repr(now()), "60000"])
    assert answer is not None and answer[0] == "running" and len(answer) == 4
    assert await rb.queues.reserve(TYPE, k=10) == []
    record = await rb.runs.get(run)
    assert record is not None and record.state == "cancelled"
    assert record.counters["cancelled"] == 3 and record.counters["pending"] == 0
    # The second step finds them already gone: nothing counted twice.
    done = await rb.runs.cancel(run)
    assert done is not None and done.stopping == ()
    record = await rb.runs.get(run)
    assert record is not None and record.counters["cancelled"] == 3
