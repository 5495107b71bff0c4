"""Conformance: the ``meters`` capability (sums of what the fleet spent, by scope) on
every backend — sums that add exactly across batches, unknown scopes, pages of scopes
by name (hour scopes never listed), the cap on a scope's meter names, hour scopes gone
after ``HOUR_KEEP_SECONDS`` at the backend's now, forget, purge_type, a batch checked
whole, and a stored value that cannot be read never breaking a read or an add."""

from __future__ import annotations

import pytest

from fleet.backends.base import Backend
from fleet.backends.redis.backend import RedisBackend
from fleet.backends.sqlite import SQLiteBackend
from fleet.core.clock import ManualClock
from fleet.core.errors import ContractValueError
from fleet.core.meters import (
    HOUR,
    HOUR_KEEP_SECONDS,
    MAX_METERS_PER_SCOPE,
    MeterBatch,
    domain_scope,
    hour_of,
    hour_scope,
    pool_scope,
    run_scope,
    type_scope,
)
from fleet.core.records import now

TYPE = "conf-meters"


def _batch(scopes: list[str], **amounts: float) -> MeterBatch:
    batch = MeterBatch()
    for meter, amount in amounts.items():
        batch.add(scopes, meter, amount)
    return batch


async def test_sums_add_exactly_across_batches(backend: Backend) -> None:
    m = backend.meters
    scopes = [type_scope(TYPE), run_scope("r-1"), domain_scope(TYPE, "shop.test")]
    assert await m.get(scopes) == {}
    await m.add(_batch(scopes, requests=1, spend=0.1, bytes_received=1234))
    await m.add(_batch(scopes[:1], requests=2, spend=0.2))
    await m.add(_batch(scopes[:1], spend=0.3))
    expected_spend = 0.1 + 0.2 + 0.3  # added in this order, as doubles
    got = await m.get([*scopes, "run:never", hour_scope(TYPE, now())])
    assert got == {
        type_scope(TYPE): {"requests": 3.0, "spend": expected_spend, "bytes_received": 1234.0},
        run_scope("r-1"): {"requests": 1.0, "spend": 0.1, "bytes_received": 1234.0},
        domain_scope(TYPE, "shop.test"): {"requests": 1.0, "spend": 0.1, "bytes_received": 1234.0},
    }
    assert got[type_scope(TYPE)]["spend"] == 0.6000000000000001  # exact doubles, not rounded sums
    assert await m.get([]) == {}
    assert await m.get(["run:never"]) == {}
    # a zero amount set directly in a batch creates the meter at 0; empty rows nothing
    await m.add(MeterBatch({pool_scope("p"): {"solves": 0.0}, run_scope("empty"): {}}))
    assert await m.get([pool_scope("p"), run_scope("empty")]) == {pool_scope("p"): {"solves": 0.0}}
    await m.add(MeterBatch())
    big = MeterBatch({type_scope(TYPE): {"spend": 1e15}})
    await m.add(big)
    await m.add(big)
    spend = (await m.get([type_scope(TYPE)]))[type_scope(TYPE)]["spend"]
    assert spend == (expected_spend + 1e15) + 1e15


async def test_scopes_pages_by_name_with_a_prefix(backend: Backend, frozen: ManualClock) -> None:
    m = backend.meters
    runs = [run_scope(f"r{i:02d}") for i in range(7)]
    others = [type_scope(TYPE), domain_scope(TYPE, "a.test"), pool_scope("p"), "runaway:x"]
    hours = [hour_scope(TYPE, now()), hour_scope(TYPE, now() - HOUR)]
    await m.add(_batch([*reversed(runs), *others, *hours], requests=1))
    seen: list[str] = []
    after = None
    while True:
        page = await m.scopes("run:", after=after, limit=3)
        assert len(page) <= 3
        seen += page
        if len(page) < 3:
            break
        after = page[-1]
    assert seen == runs
    every = sorted([*runs, *others])
    assert await m.scopes("") == every  # hour scopes are never listed
    assert await m.scopes("", limit=1000) == every
    assert await m.scopes("hour:") == [] and await m.scopes("h") == []
    assert await m.scopes("run") == [*runs, "runaway:x"]
    assert await m.scopes("run:", after="r") == runs  # after before the prefix
    assert await m.scopes("run:", after="run:r04") == runs[5:]
    assert await m.scopes("run:", after="run:r06") == []
    assert await m.scopes("run:", after="s") == []
    assert await m.scopes("", after="pool:p", limit=2) == ["run:r00", "run:r01"]
    assert await m.scopes("domain:") == [domain_scope(TYPE, "a.test")]
    assert await m.scopes("nothing:") == []
    for bad in (0, 1001, -1, True, 2.0, None):
        with pytest.raises(ContractValueError):
            await m.scopes("run:", limit=bad)  # type: ignore[arg-type]
    with pytest.raises(ContractValueError):
        await m.scopes(3)  # type: ignore[arg-type]
    with pytest.raises(ContractValueError):
        await m.scopes("run:", after=5)  # type: ignore[arg-type]


async def test_the_cap_on_a_scopes_meter_names(backend: Backend) -> None:
    m = backend.meters
    scope = run_scope("capped")
    names = {f"m{i:03d}": 1.0 for i in range(MAX_METERS_PER_SCOPE - 1)}
    await m.add(MeterBatch({scope: dict(names)}))
    # one place left: of two new names the first by name takes it, the known ones grow
    await m.add(MeterBatch({scope: {"zz_new": 1.0, "aa_new": 2.0, "m000": 1.0}}))
    got = (await m.get([scope]))[scope]
    assert len(got) == MAX_METERS_PER_SCOPE
    assert got["aa_new"] == 2.0 and "zz_new" not in got and got["m000"] == 2.0
    await m.add(
        MeterBatch({scope: {"zz_new": 1.0, "m001": 4.0}, type_scope(TYPE): {"zz_new": 1.0}})
    )
    after = await m.get([scope, type_scope(TYPE)])
    assert len(after[scope]) == MAX_METERS_PER_SCOPE and "zz_new" not in after[scope]
    assert after[scope]["m001"] == 5.0
    assert after[type_scope(TYPE)] == {"zz_new": 1.0}  # another scope has its own places


async def _hour_stored(backend: Backend, scope: str) -> bool:
    """Whether anything of ``scope`` is still stored (not just hidden from reads)."""
    if isinstance(backend, RedisBackend):
        k = backend._keys
        return bool(
            await backend._r.exists(k.METER_PREFIX + scope)
            or await backend._r.zscore(k.METER_HOURS, scope) is not None
        )
    assert isinstance(backend, SQLiteBackend)
    rows = await backend._db.read(
        lambda c: c.execute(
            "SELECT (SELECT count(*) FROM meters WHERE scope = ?) "
            "+ (SELECT count(*) FROM meter_hours WHERE scope = ?)",
            (scope, scope),
        ).fetchone()
    )
    return bool(rows[0])


async def test_hour_scopes_are_gone_after_their_keep(backend: Backend, frozen: ManualClock) -> None:
    m = backend.meters
    first = hour_scope(TYPE, now())
    await m.add(_batch([first, type_scope(TYPE)], requests=2))
    if isinstance(backend, RedisBackend):  # the hash also expires by itself
        ttl = await backend._r.ttl(backend._keys.METER_PREFIX + first)
        assert HOUR_KEEP_SECONDS - 2 * HOUR <= ttl <= HOUR_KEEP_SECONDS
    start = hour_of(first)
    assert start is not None
    frozen.set(start + HOUR_KEEP_SECONDS - 0.5)
    assert await m.get([first]) == {first: {"requests": 2.0}}
    second = hour_scope(TYPE, now())
    await m.add(_batch([second], requests=1))
    frozen.advance(0.5)
    assert await m.get([first, second]) == {second: {"requests": 1.0}}
    assert await _hour_stored(backend, first)  # hidden; deleted by the next add
    # an add to a scope already gone is dropped
    await m.add(_batch([first, type_scope(TYPE)], requests=5))
    assert await m.get([first, type_scope(TYPE)]) == {type_scope(TYPE): {"requests": 7.0}}
    assert not await _hour_stored(backend, first)
    assert await _hour_stored(backend, second)
    frozen.advance(HOUR_KEEP_SECONDS)
    assert await m.get([second]) == {}
    assert await m.scopes("") == [type_scope(TYPE)]


async def test_many_gone_hours_are_pruned_a_bounded_number_at_a_time(
    backend: Backend, frozen: ManualClock
) -> None:
    m = backend.meters
    start = now()
    hours = [hour_scope(TYPE, start + i * HOUR) for i in range(45)]
    frozen.advance(45 * HOUR)
    for scope in hours:  # each added while still kept
        await m.add(_batch([scope], requests=1))
    frozen.advance(HOUR_KEEP_SECONDS)
    assert await m.get(hours) == {}
    await m.add(_batch([type_scope(TYPE)], requests=1))
    left = [s for s in hours if await _hour_stored(backend, s)]
    assert len(left) == 25 and left == hours[20:]  # the 20 oldest first
    await m.add(_batch([type_scope(TYPE)], requests=1))
    await m.add(_batch([type_scope(TYPE)], requests=1))
    assert [s for s in hours if await _hour_stored(backend, s)] == []


async def test_forget_drops_the_scopes_with_a_prefix(backend: Backend, frozen: ManualClock) -> None:
    m = backend.meters
    hour = hour_scope(TYPE, now())
    kept = [run_scope("r1"), domain_scope("other", "a.test"), hour_scope("other", now())]
    doomed = [domain_scope(TYPE, "a.test"), domain_scope(TYPE, "b.test")]
    await m.add(_batch([*kept, *doomed, hour, type_scope(TYPE)], requests=1))
    assert await m.forget(f"domain:{TYPE}:") == 2
    assert await m.get(doomed) == {}
    assert await m.forget(f"domain:{TYPE}:") == 0
    assert await m.forget(f"hour:{TYPE}:") == 1
    assert await m.get([hour]) == {}
    assert await m.get([*kept, type_scope(TYPE)]) == {
        s: {"requests": 1.0} for s in [*kept, type_scope(TYPE)]
    }
    # a scope forgotten starts again from nothing
    await m.add(_batch(doomed[:1], spend=2))
    assert await m.get(doomed) == {doomed[0]: {"spend": 2.0}}
    assert await m.scopes("domain:") == sorted([domain_scope("other", "a.test"), doomed[0]])
    assert await m.forget("") == 5  # every scope, hour scopes too
    assert await m.scopes("") == [] and await m.get(kept) == {}
    with pytest.raises(ContractValueError):
        await m.forget(None)  # type: ignore[arg-type]


async def test_forget_walks_more_than_a_chunk(backend: Backend) -> None:
    m = backend.meters
    scopes = [run_scope(f"r{i:04d}") for i in range(1203)]
    await m.add(_batch(scopes, requests=1))
    await m.add(_batch([pool_scope("p")], requests=1))
    assert len(await m.scopes("run:", limit=1000)) == 1000
    assert await m.forget("run:") == 1203
    assert await m.scopes("") == [pool_scope("p")]


async def test_purging_a_type_drops_its_type_domain_and_hour_scopes(
    backend: Backend, frozen: ManualClock
) -> None:
    m = backend.meters
    mine = [type_scope(TYPE), domain_scope(TYPE, "a.test"), hour_scope(TYPE, now())]
    # another type whose name starts with this one's: its scopes stay
    other = f"{TYPE}x"
    theirs = [type_scope(other), domain_scope(other, "a.test"), hour_scope(other, now())]
    shared = [run_scope("r1"), pool_scope("p")]
    await m.add(_batch([*mine, *theirs, *shared], requests=1))
    await backend.purge_type(TYPE)
    assert await m.get(mine) == {}
    assert await m.get([*theirs, *shared]) == {s: {"requests": 1.0} for s in [*theirs, *shared]}
    assert await m.scopes("") == sorted([*theirs[:2], *shared])


async def test_a_bad_batch_writes_nothing(backend: Backend) -> None:
    m = backend.meters
    bad: list[dict[str, dict[str, object]]] = [
        {run_scope("a"): {"requests": 1.0}, run_scope("b"): {"requests": -1.0}},
        {run_scope("a"): {"requests": 1.0}, "": {"requests": 1.0}},
        {run_scope("a"): {"requests": 1.0}, "hour:t:x": {"requests": 1.0}},
        {run_scope("a"): {"requests": float("inf")}},
        {run_scope("a"): {"requests": "1"}},
    ]
    for sums in bad:
        with pytest.raises(ContractValueError):
            await m.add(MeterBatch(sums))  # type: ignore[arg-type]
    assert await m.get([run_scope("a")]) == {} and await m.scopes("") == []
    with pytest.raises(ContractValueError):
        await m.get("run:a")
    with pytest.raises(ContractValueError):
        await m.get(["run:a", ""])


async def _corrupt(backend: Backend, scope: str, meter: str, text: str) -> None:
    if isinstance(backend, RedisBackend):
        await backend._r.hset(backend._keys.METER_PREFIX + scope, meter, text)
        return
    assert isinstance(backend, SQLiteBackend)
    await backend._db.write(
        lambda c: c.execute(
            "UPDATE meters SET value = ? WHERE scope = ? AND meter = ?", (text, scope, meter)
        )
    )


async def test_an_unreadable_value_breaks_nothing(backend: Backend) -> None:
    m = backend.meters
    scope = run_scope("bad")
    await m.add(_batch([scope], requests=3, spend=1.5, bytes_received=10))
    await _corrupt(backend, scope, "requests", "abc")
    await _corrupt(backend, scope, "spend", "inf")
    assert await m.get([scope]) == {scope: {"requests": 0.0, "spend": 0.0, "bytes_received": 10.0}}
    await m.add(_batch([scope], requests=2, spend=0.5))
    assert await m.get([scope]) == {scope: {"requests": 2.0, "spend": 0.5, "bytes_received": 10.0}}
