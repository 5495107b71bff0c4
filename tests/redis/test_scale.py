"""Reserve and ack cost does not grow with the queue (counted in Redis commands,
including those inside scripts; not timed)."""

from __future__ import annotations

from fleet.backends.redis import RedisBackend
from fleet.core.records import PushRequest, TaskBody, new_id


async def commands(rb: RedisBackend) -> int:
    return int((await rb._r.info("stats"))["total_commands_processed"])


async def cost_of_one_cycle(rb: RedisBackend, t: str) -> tuple[int, int]:
    before = await commands(rb)
    got = await rb.queues.reserve(t, k=5, visibility_seconds=60)
    mid = await commands(rb)
    assert len(got) == 5
    assert all(await rb.queues.ack(t, [(r.body.id, r.token) for r in got]))
    after = await commands(rb)
    return mid - before, after - mid


async def test_reserve_and_ack_cost_is_flat(rb: RedisBackend) -> None:
    for t, n in (("small", 10), ("big", 5000)):
        reqs = [PushRequest(TaskBody(id=new_id(), payload=i)) for i in range(n)]
        await rb.queues.push(t, reqs)
        # Leases held by others and scheduled retries must not cost anything either.
        await rb.queues.reserve(t, k=min(n // 2, 1000), visibility_seconds=60)
        await rb.queues.push(t, [PushRequest(TaskBody(id=new_id(), payload=0), delay_seconds=60)])
    assert await cost_of_one_cycle(rb, "small") == await cost_of_one_cycle(rb, "big")
