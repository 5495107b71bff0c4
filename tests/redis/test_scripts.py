"""Lua scripts: sources resolve their includes, and a flushed script cache is
refilled transparently (NOSCRIPT -> SCRIPT LOAD -> retry)."""

from __future__ import annotations

from fleet.backends.redis import RedisBackend
from fleet.backends.redis.scripts import SCRIPT_NAMES, load_source, scripts
from fleet.core.records import PushRequest, TaskBody


def test_includes_are_resolved() -> None:
    src = load_source("reserve")
    assert "local function drain_due" in src  # from queue_common
    assert src.count("local K_NORMAL") == 1
    assert set(scripts().all) == set(SCRIPT_NAMES)


async def test_flushed_script_cache_is_reloaded(rb: RedisBackend) -> None:
    await rb._r.script_flush()
    shas = [s.sha for s in scripts().all.values()]
    assert not any(await rb._r.script_exists(*shas))
    await rb.queues.push("t", [PushRequest(TaskBody(id="a", payload=1))])
    got = await rb.queues.reserve("t")
    assert await rb.queues.ack("t", [("a", got[0].token)]) == [True]
    assert await rb.pools.claim("nothing") is None
    exists = await rb._r.script_exists(*[scripts().all[n].sha for n in ("push", "reserve")])
    assert all(exists)
