"""Differential: pools on SQLite (the SQL of ``sqlite/pools.py``; memory:// runs the
same) against Redis (``lua/pool_*.lua``), on the same random operation sequences
under one stopped clock (``fleet.core.clock``), so expiry, claims running out and
ties are compared too.

What must agree (the order is written down in ``fleet/core/capabilities/pools.py``):
which item each ``freshest``/``oldest`` claim takes, ties of equal expiry included
(told apart by id), never-expiring items after expiring ones, dict-valued tags equal
whatever the order of their keys, ``items`` and ``size`` with and without ``where``,
``release``/``evict``/``extend`` of held and lapsed claims, ``remove``, ``stats``.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core import clock
from fleet.core.records import PoolClaim

IDS = ["a", "b", "c", "d", "e", "f"]
SEQUENCES = 120


def _tags(rng: random.Random) -> dict[str, Any]:
    tags: dict[str, Any] = {"k": rng.choice([1, 2])}
    if rng.random() < 0.5:
        pairs = [("x", rng.choice([1, 2])), ("y", "v")]
        rng.shuffle(pairs)  # the same dict, its keys in either order
        tags["d"] = dict(pairs)
    return tags


def _where(rng: random.Random) -> dict[str, Any] | None:
    pick = rng.random()
    if pick < 0.4:
        return None
    if pick < 0.7:
        return {"k": rng.choice([1, 2])}
    pairs = [("y", "v"), ("x", rng.choice([1, 2]))]
    rng.shuffle(pairs)
    return {"d": dict(pairs)} if pick < 0.85 else {"k": 1, "d": dict(pairs)}


def sequence(rng: random.Random, length: int) -> list[tuple[Any, ...]]:
    ops: list[tuple[Any, ...]] = []
    for _ in range(length):
        kind = rng.choices(
            ["put", "claim", "release", "evict", "extend", "items", "size", "remove", "tick"],
            weights=[6, 5, 2, 1, 1, 2, 1, 1, 3],
        )[0]
        if kind == "put":
            ttl = rng.choice([None, None, 10.0, 10.0, 30.0])  # equal TTLs: ties
            ops.append(("put", rng.choice(IDS), _tags(rng), ttl))
        elif kind == "claim":
            ops.append(
                ("claim", _where(rng), rng.choice(["freshest", "oldest"]), rng.choice([5.0, 20.0]))
            )
        elif kind in ("release", "evict"):
            ops.append((kind, rng.randrange(8)))
        elif kind == "extend":
            ops.append(("extend", rng.randrange(8), rng.choice([5.0, 20.0])))
        elif kind in ("items", "size"):
            ops.append((kind, _where(rng)))
        elif kind == "remove":
            ops.append(("remove", rng.choice(IDS)))
        else:
            ops.append(("tick", rng.choice([0.0, 1.0, 6.0, 12.0, 25.0])))
    return ops


async def run(
    b: Backend, pool: str, ops: list[tuple[Any, ...]], manual: clock.ManualClock
) -> list[Any]:
    """What each operation answered; claims by the item they took (tokens differ)."""
    claims: list[PoolClaim] = []
    out: list[Any] = []
    for op in ops:
        kind = op[0]
        if kind == "put":
            await b.pools.put(pool, {"id": op[1]}, op[2], ttl_seconds=op[3], item_id=op[1])
            out.append(None)
        elif kind == "claim":
            got = await b.pools.claim(pool, where=op[1], strategy=op[2], hold_seconds=op[3])
            if got is not None:
                claims.append(got)
            out.append(None if got is None else (got.item.id, got.item.tags, got.lease_until))
        elif kind in ("release", "evict", "extend"):
            if not claims:
                out.append("no claim")
                continue
            c = claims[op[1] % len(claims)]
            if kind == "release":
                out.append(await b.pools.release(pool, c.item.id, c.token))
            elif kind == "evict":
                out.append(await b.pools.evict(pool, c.item.id, c.token))
            else:
                out.append(await b.pools.extend(pool, c.item.id, c.token, op[2]))
        elif kind == "items":
            out.append([i.id for i in await b.pools.items(pool, where=op[1], n=10)])
        elif kind == "size":
            out.append(await b.pools.size(pool, where=op[1]))
        elif kind == "remove":
            out.append(await b.pools.remove(pool, op[1]))
        else:
            manual.advance(op[1])
            out.append(manual.time())
    stats = await b.pools.stats(pool)
    out.append((stats.total, stats.available, stats.claimed, stats.expiring_soon))
    return out


async def test_pools_agree_on_sqlite_and_redis(tmp_path: Path, redis_url: str) -> None:
    sq = await open_backend(f"sqlite:///{tmp_path / 'pools.db'}")
    rd = await open_backend(redis_url)
    compared = 0
    try:
        for seed in range(SEQUENCES):
            rng = random.Random(seed)
            ops = sequence(rng, rng.randrange(5, 40))
            pool = f"diff-{seed}"
            results = []
            for backend in (sq, rd):
                # Both start at the same stopped time: every expiry and lease is equal.
                with clock.frozen(1_800_000_000.0 + seed) as manual:
                    results.append(await run(backend, pool, ops, manual))
            assert results[0] == results[1], (seed, ops, results)
            compared += sum(1 for op in ops if op[0] == "claim")
    finally:
        await sq.close()
        await rd.close()
    assert compared > SEQUENCES  # the sequences did claim


def test_the_order_is_the_documented_one() -> None:
    from fleet.core.capabilities.pools import NEVER, place_of, tag_text

    assert place_of(5.0, 1.0) < place_of(None, 0.0) < place_of(None, 2.0)
    assert place_of(None, 2.0) == NEVER + 2.0
    assert tag_text({"b": 2, "a": 1}) == tag_text({"a": 1, "b": 2}) == '{"a":1,"b":2}'


@pytest.mark.parametrize("strategy", ["freshest", "oldest"])
async def test_ties_of_equal_expiry_go_by_id(backend: Backend, strategy: str) -> None:
    with clock.frozen(1_800_000_000.0):
        for item in ("m", "z", "a"):
            await backend.pools.put("ties", {}, {}, ttl_seconds=10, item_id=item)
        await backend.pools.put("ties", {}, {}, item_id="never")
        taken = []
        while (got := await backend.pools.claim("ties", strategy=strategy)) is not None:  # type: ignore[arg-type]
            taken.append(got.item.id)
    expected = ["never", "z", "m", "a"] if strategy == "freshest" else ["a", "m", "z", "never"]
    assert taken == expected


async def test_dict_tags_match_whatever_their_key_order(backend: Backend) -> None:
    await backend.pools.put("dicts", {}, {"d": {"b": 2, "a": 1}}, item_id="x")
    assert await backend.pools.size("dicts", where={"d": {"a": 1, "b": 2}}) == 1
    got = await backend.pools.claim("dicts", where={"d": {"a": 1, "b": 2}})
    assert got is not None and got.item.id == "x"
