"""Differential: meters on SQLite (``sqlite/meters.py``: the pure rule
:func:`fleet.core.meters.added` in Python; memory:// runs the same) against Redis (its
only other copy, ``lua/meters.lua``), and both against the rule applied here, on the
same random sequences under one stopped clock (``fleet.core.clock``).

A sequence adds random batches (amounts with fractions, whole ones, tiny and huge ones,
zeros; many meter names on one scope, so the cap is met; hour scopes of the hours the
clock passes) and moves the clock (by minutes, hours, and past an hour scope's keep).
After each step every scope's meters, compared as doubles to the last bit, and the
listed scopes must be the same three times.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from redis.crc import key_slot

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.backends.redis.keys import KeySpace
from fleet.core import clock
from fleet.core.clock import ManualClock
from fleet.core.meter_store import gone
from fleet.core.meters import (
    HOUR,
    HOUR_KEEP_SECONDS,
    MAX_METERS_PER_SCOPE,
    MeterBatch,
    added,
    hour_scope,
)

FIXED = ["type:t", "run:r1", "run:r2", "domain:t:a.test", "pool:p"]
#: A scope that is given far more names than it keeps.
CROWDED = "run:crowded"
METERS = ["requests", "spend", "bytes:direct", "bytes:residential", "solves:capsolver", "x_units"]
MANY = [f"n{i:03d}" for i in range(MAX_METERS_PER_SCOPE + 40)]
ADVANCES = [0.0, 1.5, 60.0, HOUR, 5 * HOUR + 0.25, 10 * 24 * HOUR, HOUR_KEEP_SECONDS]
SEQUENCES = 60


def _amount(rng: random.Random) -> float:
    kind = rng.randrange(6)
    if kind == 0:
        return float(rng.randrange(0, 5))
    if kind == 1:
        return rng.random()
    if kind == 2:
        return rng.choice([0.1, 0.2, 0.3, 1e-9, 1 / 3])
    if kind == 3:
        return rng.uniform(0, 1e15)
    if kind == 4:
        return round(rng.uniform(0, 50), 4)
    return rng.random() * 10.0 ** rng.randrange(-12, 12)


def batch_of(rng: random.Random, at: float) -> MeterBatch:
    scopes = [*FIXED, hour_scope("t", at), hour_scope("t", at - rng.choice([HOUR, 40 * 24 * HOUR]))]
    batch = MeterBatch()
    for scope in rng.sample(scopes, rng.randrange(1, len(scopes) + 1)):
        row = batch.sums.setdefault(scope, {})
        for meter in rng.sample(METERS, rng.randrange(0, 4)):
            row[meter] = _amount(rng)
    if rng.random() < 0.5:
        crowded = batch.sums.setdefault(CROWDED, {})
        for meter in rng.sample(MANY, rng.randrange(1, 80)):
            crowded[meter] = _amount(rng)
    return batch


def sequence(rng: random.Random, start: float, length: int) -> list[tuple[Any, ...]]:
    ops: list[tuple[Any, ...]] = []
    t = start
    for _ in range(length):
        if rng.random() < 0.7:
            ops.append(("add", batch_of(rng, t)))
        else:
            step = rng.choice(ADVANCES)
            t += step
            ops.append(("tick", step))
    return ops


def _scopes_seen(ops: list[tuple[Any, ...]]) -> list[str]:
    names = {s for op in ops if op[0] == "add" for s in op[1].sums}
    return sorted(names | {*FIXED, CROWDED})


async def _listing(backend: Backend) -> list[str]:
    out: list[str] = []
    after = None
    while True:
        page = await backend.meters.scopes("", after=after, limit=3)
        out += page
        if len(page) < 3:
            return out
        after = page[-1]


async def run(
    backend: Backend, ops: list[tuple[Any, ...]], manual: ManualClock, names: list[str]
) -> list[Any]:
    trace: list[Any] = []
    for op in ops:
        if op[0] == "add":
            await backend.meters.add(op[1])
            got = await backend.meters.get(names)
            trace.append({s: {m: v.hex() for m, v in row.items()} for s, row in got.items()})
        else:
            manual.advance(op[1])
    trace.append(await _listing(backend))
    return trace


def model(ops: list[tuple[Any, ...]], start: float, names: list[str]) -> list[Any]:
    """The sequence by the pure rule: what both engines must answer."""
    t = start
    known: dict[str, dict[str, float]] = {}
    trace: list[Any] = []
    for op in ops:
        if op[0] == "add":
            for scope, row in op[1].sums.items():
                if row and not gone(scope, t):
                    known[scope] = added(known.get(scope, {}), row)
            trace.append(
                {
                    s: {m: v.hex() for m, v in known[s].items()}
                    for s in names
                    if known.get(s) and not gone(s, t)
                }
            )
        else:
            t += op[1]
    trace.append(sorted(s for s in known if not s.startswith("hour:")))
    return trace


async def test_meters_agree_on_sqlite_redis_and_the_rule(tmp_path: Path, redis_url: str) -> None:
    sq = await open_backend(f"sqlite:///{tmp_path / 'meters.db'}")
    rd = await open_backend(redis_url)
    capped = 0
    try:
        for seed in range(SEQUENCES):
            rng = random.Random(seed)
            start = 1_800_000_000.1 + seed * 7919.37
            ops = sequence(rng, start, rng.randrange(5, 40))
            names = _scopes_seen(ops)
            expected = model(ops, start, names)
            for backend in (sq, rd):
                await backend.meters.forget("")
                with clock.frozen(start) as manual:
                    got = await run(backend, ops, manual, names)
                assert got == expected, (seed, type(backend).__name__)
            capped += any(
                len(step.get(CROWDED, {})) == MAX_METERS_PER_SCOPE for step in expected[:-1]
            )
    finally:
        await sq.close()
        await rd.close()
    # The sequences did meet the cap.
    assert capped > SEQUENCES // 4, capped


def test_the_keys_share_one_slot_on_a_cluster() -> None:
    ks = KeySpace("acme", cluster=True)
    names = ks.meter_keys(["type:scrape", "run:r-1", "hour:scrape:3600", "x{y}"])
    assert names == [
        "acme:fleet:meter-scopes:{meters}",
        "acme:fleet:meter-hours:{meters}",
        "acme:fleet:meters:{meters}:type:scrape",
        "acme:fleet:meters:{meters}:run:r-1",
        "acme:fleet:meters:{meters}:hour:scrape:3600",
        "acme:fleet:meters:{meters}:x{y}",
    ]
    assert {key_slot(n.encode()) for n in names} == {key_slot(b"meters")}
    assert KeySpace().meter_keys(["type:scrape"]) == [
        "fleet:meter-scopes",
        "fleet:meter-hours",
        "fleet:meters:type:scrape",
    ]
