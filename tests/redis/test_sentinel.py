"""Redis Sentinel (``redis+sentinel://``): a primary, a replica and three sentinels on
this machine. The backend finds the primary through the sentinels, on both of its
clients; when the primary is killed mid-drain, workers and master carry on with the
promoted replica within seconds, and every task is done."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import httpx
import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.backends.redis.sentinel import parse_sentinel_url
from fleet.core.errors import BackendUnavailable, ConfigError
from fleet.core.submission import make_push_request
from tests.chaos.harness import TYPE, ChaosFleet, submit, wait_settled
from tests.support.sentinel import SentinelSet
from tests.support.waits import until, until_sync

pytestmark = [pytest.mark.timeout(240)]


@pytest.fixture
def sentinels() -> Iterator[SentinelSet]:
    s = SentinelSet()
    try:
        s.start()
        yield s
    finally:
        s.cleanup()


def test_sentinel_urls_are_read_or_refused_clearly() -> None:
    t = parse_sentinel_url("redis+sentinel://u:p%40ss@h1:26379,h2:26380/svc/3?socket_timeout=2")
    assert t.sentinels == (("h1", 26379), ("h2", 26380))
    assert (t.service, t.db, t.username, t.password) == ("svc", 3, "u", "p@ss")
    assert t.options == {"socket_timeout": "2"}
    assert parse_sentinel_url("redis+sentinel://h1/svc").sentinels == (("h1", 26379),)
    for bad, why in [
        ("redis+sentinel://h1:26379", "service"),
        ("redis+sentinel://h1:x/svc", "port"),
        ("redis+sentinel://h1:26379/svc/zero", "not a number"),
        ("redis+sentinel://h1:26379/svc/0/more", "path"),
        ("redis+sentinel://h1:26379/svc?ssl_cert_reqs=none", "TLS"),
    ]:
        with pytest.raises(ValueError, match=why):
            parse_sentinel_url(bad)


async def test_a_bad_sentinel_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="service"):
        await open_backend("redis+sentinel://127.0.0.1:1")


async def test_no_sentinel_answers_is_unavailable_not_a_hang() -> None:
    b = await open_backend_lazy("redis+sentinel://127.0.0.1:1,127.0.0.1:2/svc")
    started = time.monotonic()
    with pytest.raises(BackendUnavailable):
        await b.queues.push(TYPE, [make_push_request({"n": 1})])
    assert time.monotonic() - started < 15
    await b.close()


async def open_backend_lazy(url: str) -> Backend:
    """The backend of ``url``, not connected (``open_backend`` would connect)."""
    from fleet.backends.redis import RedisBackend

    return RedisBackend(url)


async def test_the_backend_works_through_sentinel(sentinels: SentinelSet) -> None:
    async with await open_backend(sentinels.url) as b:
        assert await b.ping()
        await b.queues.push(TYPE, [make_push_request({"n": i}) for i in range(5)])
        got = await b.queues.reserve(TYPE, k=5, visibility_seconds=30, default_max_attempts=3)
        assert len(got) == 5
        assert await b.queues.ack(TYPE, [(r.body.id, r.token) for r in got]) == [True] * 5
        # the blocking client (redis-py through master_for) reaches the primary too
        got = await b.queues.reserve(TYPE, k=1, visibility_seconds=30, timeout=0.3)
        assert got == []
        assert (await b.queues.depths(TYPE)).counters.completed == 5


async def test_failover_mid_drain(sentinels: SentinelSet, tmp_path: Path) -> None:
    fleet = ChaosFleet(sentinels.url, tmp_path, slots=8)
    await fleet.configure()
    n = 1500
    try:
        async with await open_backend(sentinels.url) as b:
            ids = await submit(b, [{"n": i, "ms": 20} for i in range(n)])
            fleet.start_master()
            assert fleet.master is not None
            await fleet.master.wait_ready()
            fleet.add_worker("s1")
            fleet.add_worker("s2")
            await _until(lambda: _completed(b), n // 4, 60)
            old = sentinels.primary_port()
            assert old == sentinels.primary.port
            sentinels.primary.stop(kill=True)
            killed = time.monotonic()
            promoted = await asyncio.to_thread(_wait_promoted, sentinels, old)
            failover_s = time.monotonic() - killed
            assert promoted == sentinels.replica.port
            await _until(lambda: _completed(b), 0, 30)  # this process reaches it too
            after = await _completed(b)
            await _until(lambda: _completed(b), after + 100, 60)
            resumed_s = time.monotonic() - killed
            done, dead, other = await wait_settled(b, ids, 120)
            assert not other and not dead, (len(other), len(dead))
            assert len(done) == n
            # the master follows too: it answers from the new primary
            async with httpx.AsyncClient(base_url=fleet.master.url, timeout=10) as http:
                r = await http.get(
                    f"/api/v1/automations/{TYPE}/queue",
                    headers={"Authorization": "Bearer " + _token()},
                )
                assert r.status_code == 200, r.text
                assert r.json()["counters"]["completed"] >= n - 200
        _, ends = fleet.ledger.read()
        reran = sum(len(p) - 1 for t, p in ends.items() if len(p) > 1)
        print(
            f"\nsentinel failover: promoted after {failover_s:.1f} s, drain resumed after "
            f"{resumed_s:.1f} s; {n} tasks all done; {reran} ran twice (acks lost in the "
            "replication window or sent while no primary answered)"
        )
        assert reran < n // 5
    finally:
        fleet.close()


def _token() -> str:
    from tests.support.master_proc import MASTER_TOKEN

    return MASTER_TOKEN


def _wait_promoted(s: SentinelSet, old: int | None) -> int:
    def promoted() -> int | None:
        port = s.primary_port()
        return port if port is not None and port != old else None

    port = until_sync(promoted, timeout=60, interval=0.1, what="a failover")
    assert port is not None
    return port


async def _completed(b: Backend) -> int:
    """The type's completed counter, or -1 while no primary answers."""
    try:
        return int((await b.queues.depths(TYPE)).counters.completed)
    except BackendUnavailable:
        return -1


async def _until(read: Callable[[], Awaitable[int]], at_least: int, timeout: float) -> None:
    async def reached() -> bool:
        return await read() >= at_least

    await until(reached, timeout=timeout, interval=0.1, what=f"{at_least} reached")
