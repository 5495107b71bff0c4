"""Redis Cluster (``redis+cluster://``): three primaries on this machine
(``redis-server --cluster-enabled yes`` joined by ``redis-cli --cluster create``).

The conformance modules of the capabilities a cluster serves run here unchanged, over
a backend on the cluster (their ``backend`` fixture is overridden below); an
end-to-end drain runs a master and two worker processes on it; the key layout keeps
every key of one type in one hash slot; what the cluster does not serve (runs, proxy
health) is refused with a clear error.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import ModuleType

import pytest
import redis
from redis.cluster import key_slot

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.backends.redis.keys import KeySpace
from fleet.core.errors import UnsupportedBackend
from fleet.core.submission import make_push_request
from tests.chaos.harness import TYPE, ChaosFleet, submit, wait_settled
from tests.conformance import (
    test_configs,
    test_events,
    test_fleet_state,
    test_groups,
    test_history,
    test_limits,
    test_pools,
    test_primitives,
    test_queue_admin,
    test_queue_leases,
    test_queue_machine,
    test_queue_reserve,
    test_queue_started,
    test_queue_ttl_log,
    test_schedule_store,
    test_streams,
    test_task_records,
)
from tests.support.redis_cluster import ClusterSet
from tests.support.waits import until

pytestmark = [pytest.mark.timeout(240)]

#: The conformance modules run on the cluster, as they run on every backend.
SERVED: tuple[ModuleType, ...] = (
    test_queue_reserve,
    test_queue_leases,
    test_queue_admin,
    test_queue_started,
    test_queue_machine,
    test_queue_ttl_log,
    test_task_records,
    test_groups,
    test_streams,
    test_primitives,
    test_events,
    test_fleet_state,
    test_configs,
    test_pools,
    test_limits,
    test_schedule_store,
    test_history,
)
#: Tests of those modules that use what a cluster refuses (runs).
NOT_SERVED = {
    "test_a_run_task_record_keeps_its_run",
    # Writes a corrupt value under the spec's (untagged) key name with a plain client.
    "test_unreadable_generations_read_as_none",
}

for _module in SERVED:
    for _name in dir(_module):
        _test = getattr(_module, _name)
        if _name.startswith("test_") and callable(_test) and _name not in NOT_SERVED:
            globals()[f"test_{_module.__name__.rsplit('.', 1)[-1][5:]}__{_name[5:]}"] = _test
        elif hasattr(_test, "_fixture_function_marker") and _name not in ("backend", "backend_url"):
            globals()[_name] = _test  # the module's own fixtures (bounded, short_lived...)


@pytest.fixture(scope="module")
def cluster() -> Iterator[ClusterSet]:
    c = ClusterSet()
    try:
        c.start()
        yield c
    finally:
        c.cleanup()


@pytest.fixture
def backend_url(cluster: ClusterSet) -> str:
    """What the conformance tests open (a second backend on the same cluster)."""
    cluster.flush()
    return cluster.url


@pytest.fixture
async def backend(backend_url: str) -> AsyncIterator[Backend]:
    b = await open_backend(backend_url)
    try:
        yield b
    finally:
        await b.close()


def test_every_key_of_a_type_shares_one_slot() -> None:
    ks = KeySpace("acme", cluster=True)
    names = [*ks.queue_keys("scrape", 0), ks.stream("scrape"), ks.workers_index("scrape")]
    names += [ks.worker_key("scrape", "w1", "state"), ks.config_override("scrape", "w1")]
    names += [ks.task_record("scrape", "t1"), ks.idempotency("scrape", "k"), ks.config("scrape")]
    names += [*ks.history_keys("scrape"), ks.groups_meta("scrape")]
    assert {key_slot(n.encode()) for n in names} == {key_slot(b"scrape")}
    assert names[0] == "acme:fleet:queue:{scrape}"
    pools = [*ks.pool_keys("cookies"), ks.pool_claim("cookies", "i1"), ks.pool_tag_prefix("x")]
    assert {key_slot(n.encode()) for n in pools} == {key_slot(b"pools")}
    schedules = [ks.SCHEDULES_DUE, ks.schedules("scrape"), ks.schedules("other")]
    assert len({key_slot(n.encode()) for n in schedules}) == 1
    # Without cluster mode the spec's names are untouched.
    assert KeySpace().queue("scrape") == "fleet:queue:scrape"


async def test_types_spread_over_the_cluster_and_every_node_serves(cluster: ClusterSet) -> None:
    cluster.flush()
    b = await open_backend(cluster.url)
    try:
        for i in range(12):
            await b.queues.push(f"t{i}", [make_push_request({"n": i})])
    finally:
        await b.close()
    held = []
    for node in cluster.nodes:
        with redis.Redis(port=node.port) as r:
            held.append(r.dbsize())
    assert sum(1 for n in held if n > 0) >= 2, held  # not all on one node


async def test_runs_and_proxy_health_are_refused_clearly(cluster: ClusterSet) -> None:
    b = await open_backend(cluster.url)
    try:
        with pytest.raises(UnsupportedBackend, match="runs"):
            await b.runs.create(name="r")
        with pytest.raises(UnsupportedBackend, match="proxy"):
            await b.proxies.take(["http://p:1"], "tok")
        assert await b.proxies.listing() == []
    finally:
        await b.close()


async def test_a_master_and_two_workers_drain_on_the_cluster(
    cluster: ClusterSet, tmp_path: Path
) -> None:
    cluster.flush()
    fleet = ChaosFleet(cluster.url, tmp_path, slots=8)
    await fleet.configure()
    n = 800
    try:
        async with await open_backend(cluster.url) as b:
            fleet.start_master()
            assert fleet.master is not None
            await fleet.master.wait_ready()
            fleet.add_worker("c1")
            fleet.add_worker("c2")

            async def both_registered() -> bool:
                return len(await b.workers.ids(TYPE)) == 2

            # Both registered before any task, so both get some.
            await until(both_registered, timeout=30, interval=0.1, what="both workers")
            ids = await submit(b, [{"n": i, "ms": 10} for i in range(n)])
            done, dead, other = await wait_settled(b, ids, 120)
            assert not other and not dead, (len(other), len(dead))
            assert len(done) == n
            workers = dict(await b.workers.all())
            assert set(workers) == {TYPE} and len(await b.workers.ids(TYPE)) == 2
        _, ends = fleet.ledger.read()
        by_pid: dict[int, int] = {}
        for pids in ends.values():
            by_pid[pids[0]] = by_pid.get(pids[0], 0) + 1
        assert len(by_pid) == 2, by_pid  # both workers took tasks
        assert all(len(p) == 1 for p in ends.values())  # none ran twice
    finally:
        fleet.close()
