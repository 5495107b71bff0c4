"""The browse indexes' life on Redis (``lua/browse.lua``, ``IDX_SUFFIX`` in
``queue_common.lua``): a type nobody browses has no live index and its scripts write
none; the first page builds them and sets the marker with a TTL that every page
renews, the indexes expiring with it; the scripts keep them while it lives; once it is
gone the next page rebuilds them from the records; the DLQ's index is always kept, and
dead letters it lacks are indexed by the next DLQ page."""

from __future__ import annotations

import redis.asyncio as aioredis

from fleet.backends.redis import RedisBackend
from fleet.backends.redis.browse import KEEP_SECONDS
from fleet.core.records import PushRequest, TaskBody

Q = "fleet:queue:t"
MARKER = Q + ":browse"
LIVE = [f"{Q}:browse:{s}" for s in ("pending", "scheduled", "processing")]


def req(task_id: str, at: float, delay: float = 0.0) -> PushRequest:
    return PushRequest(TaskBody(id=task_id, payload={}, enqueued_at=at), delay)


async def ids(rb: RedisBackend, state: str) -> list[str]:
    page = await rb.browse.page("t", state, 100, None)  # type: ignore[arg-type]
    return [s.id for s in page.items]


async def test_a_type_nobody_browses_writes_no_live_index(
    rb: RedisBackend, raw: aioredis.Redis
) -> None:
    await rb.queues.push("t", [req(f"a{i}", 100.0 + i) for i in range(5)])
    await rb.queues.push("t", [req("later", 50.0, delay=3600.0)])
    got = await rb.queues.reserve("t", k=2)
    await rb.queues.ack("t", [(got[0].body.id, got[0].token)])
    assert await raw.exists(MARKER, *LIVE) == 0
    # The first page builds them all, from the records.
    assert await ids(rb, "pending") == ["a4", "a3", "a2"]
    assert await raw.get(MARKER) == "1"
    assert 0 < await raw.pttl(MARKER) <= KEEP_SECONDS * 1000
    for key in LIVE:
        assert 0 < await raw.pttl(key) <= KEEP_SECONDS * 1000
    assert await ids(rb, "processing") == ["a1"]
    assert await ids(rb, "scheduled") == ["later"]
    # Kept while browsed: the moves land in the indexes.
    more = await rb.queues.reserve("t", k=1)
    assert await ids(rb, "processing") == [more[0].body.id, "a1"]
    assert await raw.zscore(LIVE[0], more[0].body.id) is None
    await rb.queues.ack("t", [(more[0].body.id, more[0].token)])
    assert await ids(rb, "processing") == ["a1"]


async def test_after_the_marker_the_next_page_rebuilds(
    rb: RedisBackend, raw: aioredis.Redis
) -> None:
    await rb.queues.push("t", [req(f"a{i}", 100.0 + i) for i in range(3)])
    assert await ids(rb, "pending") == ["a2", "a1", "a0"]
    await raw.delete(MARKER)  # what KEEP_SECONDS without a page does
    got = await rb.queues.reserve("t", k=2)  # not kept: the indexes go stale
    await rb.queues.push("t", [req("b", 200.0)])
    assert await raw.zscore(LIVE[0], "b") is None
    assert await ids(rb, "pending") == ["b", "a2"]
    assert sorted(await ids(rb, "processing")) == sorted(r.body.id for r in got)


async def test_dead_letters_missing_from_the_index_are_indexed_by_a_page(
    rb: RedisBackend, raw: aioredis.Redis
) -> None:
    await rb.queues.push("t", [req(f"d{i}", 100.0 + i) for i in range(3)])
    for r in await rb.queues.reserve("t", k=3):
        await rb.queues.nack("t", r.body.id, r.token, delay_seconds=0.0, dead=True)
    assert await raw.zcard(Q + ":browse:dead") == 3  # kept without any page
    assert await raw.exists(MARKER) == 0
    await raw.delete(Q + ":browse:dead")  # as a Fleet before the indexes left it
    assert await ids(rb, "dead") == ["d2", "d1", "d0"]
    assert await raw.zcard(Q + ":browse:dead") == 3
