"""A blocking reserve keeps the visibility it was called with while it waits: the
feeder cuts what it takes to the visibility the config asks now. Found by the real
crawl's kill test: a worker's first reserve went out before the fleet's config
(``visibility_seconds=10``) landed, took the first task for the default 300 s, and the
worker killed a second later held that task for five minutes."""

from __future__ import annotations

import asyncio
import time

from fleet.backends.base import Backend
from fleet.worker.feeder import Feeder
from tests.worker.support import push

T = "wt-relet"


async def test_a_lease_taken_by_a_wait_older_than_the_config_has_its_visibility(
    backend: Backend,
) -> None:
    params = [(300.0, 3)]
    f = Feeder(backend.queues, T, lambda: params[-1], block_seconds=3.0)
    f.start()
    try:
        waiting = asyncio.ensure_future(f.get())
        await asyncio.sleep(0.3)  # the reserve is out, blocked on an empty queue
        params.append((10.0, 3))  # the config lands meanwhile
        (task_id,) = await push(backend, T, {"n": 1})
        got = await asyncio.wait_for(waiting, 5)
        assert got is not None and got.body.id == task_id
        now = time.time()
        info = await backend.queues.state(T, task_id)
        assert info.state == "processing" and info.deadline is not None
        assert info.deadline <= now + 10.5, info.deadline - now
        assert got.deadline <= now + 10.5
        # Still ours: the shortened lease is acked with its token.
        assert await backend.queues.ack(T, [(task_id, got.token)]) == [True]
    finally:
        await f.close()


async def test_a_lease_is_left_alone_when_the_config_did_not_shorten_it(
    backend: Backend,
) -> None:
    f = Feeder(backend.queues, T, lambda: (60.0, 3), block_seconds=3.0)
    f.start()
    try:
        waiting = asyncio.ensure_future(f.get())
        await asyncio.sleep(0.3)
        (task_id,) = await push(backend, T, {"n": 1})
        got = await asyncio.wait_for(waiting, 5)
        assert got is not None
        info = await backend.queues.state(T, task_id)
        assert info.deadline is not None and info.deadline > time.time() + 55
    finally:
        await f.close()
