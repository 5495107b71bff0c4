"""Differential: the budget rule (:func:`fleet.core.budgets.over`, which the SQLite engine
calls) against its only other copy in ``lua/meters.lua``, on random budgets and meters;
then whole sequences of meter adds into runs with budgets on SQLite and on Redis: each
run pauses at the same add, with the same reason, as the rule says it should."""

from __future__ import annotations

import json
import random
from pathlib import Path

from fleet.backends import open_backend
from fleet.backends.redis.backend import RedisBackend
from fleet.core.budgets import over
from fleet.core.meters import MeterBatch, run_scope

NAMES = ["spend", "bytes", "solver_calls", "requests", "bytes:residential", "api_credits"]
METERS = [
    "spend", "bytes_received", "bytes_sent", "solves", "requests", "bytes:residential",
    "api_credits", "attempts",
]  # fmt: skip


def _value(rng: random.Random) -> float:
    return rng.choice(
        [0.0, 1.0, 999.5, 1000.0, 1e6, rng.random() * 2000, round(rng.uniform(0, 5000), 2)]
    )


def budget_of(rng: random.Random) -> dict[str, float]:
    return {n: rng.choice([1.0, 500.0, 1000.0, 1e6, rng.uniform(1, 3000)]) for n in
            rng.sample(NAMES, rng.randrange(1, 4))}  # fmt: skip


async def test_the_lua_rule_is_the_python_rule(redis_url: str) -> None:
    rng = random.Random(45)
    b = await open_backend(redis_url)
    try:
        assert isinstance(b, RedisBackend)
        for _ in range(400):
            budget = budget_of(rng)
            meters = {m: _value(rng) for m in rng.sample(METERS, rng.randrange(0, len(METERS)))}
            lua = await b.meters.script(
                b.meters._lane,
                b._keys.meter_keys([]),
                ["budget_over", "p", "0", json.dumps(budget), json.dumps(meters or {"_": 0})],
            )
            text = lua.decode() if isinstance(lua, bytes) else str(lua)
            assert (text or None) == over(budget, meters), (budget, meters)
    finally:
        await b.close()


async def test_runs_pause_at_the_same_add_on_sqlite_and_redis(
    tmp_path: Path, redis_url: str
) -> None:
    rng = random.Random(4545)
    sq = await open_backend(f"sqlite:///{tmp_path / 'budgets.db'}")
    rd = await open_backend(redis_url)
    try:
        for _ in range(25):
            budget = budget_of(rng)
            runs = [await b.runs.create(budget=budget) for b in (sq, rd)]
            totals: dict[str, float] = {}
            expected: str | None = None
            for _step in range(12):
                row = {m: _value(rng) for m in rng.sample(METERS, rng.randrange(1, 4))}
                for b, run in zip((sq, rd), runs, strict=True):
                    batch = MeterBatch()
                    for meter, amount in row.items():
                        batch.add([run_scope(run)], meter, amount)
                    await b.meters.add(batch)
                for meter, amount in row.items():
                    if amount > 0:
                        totals[meter] = totals.get(meter, 0.0) + amount
                if expected is None:
                    expected = over(budget, totals)
                for b, run in zip((sq, rd), runs, strict=True):
                    rec = await b.runs.get(run)
                    assert rec is not None
                    assert rec.state == ("running" if expected is None else "paused")
                    assert rec.paused_reason == expected, (type(b).__name__, budget, totals)
    finally:
        await sq.close()
        await rd.close()
