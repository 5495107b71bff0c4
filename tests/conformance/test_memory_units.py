"""Plain (no event loop) tests of the memory backend's state classes: the paths
the interface-level suite cannot steer, such as index compaction and clock steps."""

from __future__ import annotations

from fleet.backends.memory.limits import SCAN_SECONDS, LimitTable
from fleet.backends.memory.pool import PoolState
from fleet.backends.memory.queue import QueueState
from fleet.backends.memory.stream import StreamState
from fleet.core.records import PushRequest, TaskBody

T0 = 1_000_000.0


def test_pool_heaps_stay_bounded_under_claim_release_churn() -> None:
    pool = PoolState("p")
    ids = [
        pool.put({"i": i}, {"site": "a"}, ttl_seconds=None, item_id=None, now=T0) for i in range(50)
    ]
    for n in range(5_000):
        claim = pool.claim({"site": "a"}, 60, "oldest" if n % 2 else "freshest", T0, f"t{n}")
        assert claim is not None
        assert pool.release(claim.item.id, f"t{n}", T0)
    for bucket_map in pool.indexes.values():
        for bucket in bucket_map.values():
            assert bucket.count == 50
            assert len(bucket.fresh) <= 2 * 50 + 64 + 1
            assert len(bucket.old) <= 2 * 50 + 64 + 1
    assert pool.size({"site": "a"}, T0) == 50
    assert sorted(i.id for i in pool.available(None, 100, T0)) == sorted(ids)


def test_pool_index_built_late_sees_existing_and_claimed_items() -> None:
    pool = PoolState("p")
    a = pool.put({}, {"site": "a", "k": 1}, ttl_seconds=None, item_id=None, now=T0)
    b = pool.put({}, {"site": "a", "k": 2}, ttl_seconds=None, item_id=None, now=T0)
    held = pool.claim(None, 10, "freshest", T0, "tok")
    assert held is not None and held.item.id == b
    assert pool.size({"site": "a", "k": 2}, T0) == 0  # index built while b is held
    assert pool.release(b, "tok", T0)
    assert pool.size({"site": "a", "k": 2}, T0) == 1
    assert pool.size({"site": "a", "k": 1}, T0) == 1
    assert pool.remove(a, T0)
    assert pool.size({"site": "a"}, T0) == 1


def test_pool_lease_and_item_expiry_are_lazy_and_exact() -> None:
    pool = PoolState("p")
    item = pool.put({}, {}, ttl_seconds=10, item_id=None, now=T0)
    claim = pool.claim(None, 5, "random", T0, "tok")
    assert claim is not None
    assert pool.claim(None, 5, "random", T0 + 4.9, "tok2") is None
    again = pool.claim(None, 5, "random", T0 + 5.0, "tok2")
    assert again is not None and again.item.id == item
    assert not pool.extend(item, "tok", 5, T0 + 5.0)
    assert pool.maintain(T0 + 10.0) == 1
    assert pool.items == {}


def test_stream_keeps_id_order_when_the_clock_steps_back() -> None:
    stream = StreamState()
    late = stream.push({"n": 1}, worker_id="w", now=T0 + 5, max_len=10, max_age=3600)
    early = stream.push({"n": 2}, worker_id="w", now=T0, max_len=10, max_age=3600)
    assert [e.id for e in stream.peek(10)] == [early.id, late.id]
    assert [e.id for e in stream.read(early.id, 10)] == [late.id]


def test_stream_compacts_its_dead_head() -> None:
    stream = StreamState()
    for i in range(3_000):
        stream.push({"n": i}, worker_id="w", now=T0 + i * 1e-3, max_len=100, max_age=3600)
    assert len(stream) == 100
    assert len(stream._ids) < 2_200  # trimmed entries do not pile up forever
    assert [e.payload["n"] for e in stream.tail(2)] == [2_998, 2_999]


def test_queue_lazy_entries_do_not_leak_into_counts() -> None:
    q = QueueState()
    q.push([PushRequest(TaskBody(id=f"t{i}", payload=None)) for i in range(10)], T0)
    for i in range(0, 10, 2):
        assert q.cancel(f"t{i}", T0) == "cancelled"
    assert q.depths(T0).normal == 5
    got = q.take(10, 30, 3, T0)
    assert [r.body.id for r in got] == ["t1", "t3", "t5", "t7", "t9"]
    assert q.depths(T0).processing == 5
    # Extending leaves an old lease entry behind; a sweep must skip it.
    assert q.extend("t1", got[0].token, 100, T0).value == "ok"
    assert q.sweep(T0 + 50) == 4
    assert q.task_state("t1", T0 + 50).state == "processing"


def test_unused_limiters_are_forgotten() -> None:
    table = LimitTable()
    for i in range(100):
        lim = table.get(f"k{i}", T0)
        lim.holders["t"] = T0 + 1  # a place held for 1 s
        lim.tat, lim.tat_until = T0 + 2, T0 + 3  # a rate that matters for 3 s
        table.tidy(f"k{i}", lim, T0)
    assert len(table.limiters) == 100
    # Touching one after its hold ended but while its rate matters keeps it.
    lim = table.get("k0", T0 + 2)
    assert lim.holders == {} and lim.tat == T0 + 2
    table.tidy("k0", lim, T0 + 2)
    assert "k0" in table.limiters
    # Once nothing of them matters, a touch drops one, the next scan every other one.
    lim = table.get("k1", T0 + 3)
    table.tidy("k1", lim, T0 + 3)
    assert "k1" not in table.limiters
    table.get("new", T0 + SCAN_SECONDS + 1)
    assert list(table.limiters) == ["new"]
