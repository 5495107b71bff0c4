"""Differential: identity pools on SQLite (the SQL of ``sqlite/identities.py``; memory://
runs the same) against Redis (``lua/identities.lua``), on the same random operation
sequences under one stopped clock (``fleet.core.clock``), so lease deadlines, cool-downs
and the pool's order are compared too.

What must agree (the rules are written down in ``fleet/core/identities.py``): which
identity each lease takes (least recently leased, then id; up to a concurrency; a sticky
key's identity, or none while it is busy or cooling), renewals and releases of held and
lapsed leases, blocks cooling or retiring, retire, revive, delete, and every identity's
state, leases, stats and cookies after the sequence.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core import clock
from fleet.core.clock import ManualClock
from fleet.core.identities import IdentityLease, parse_identity

IDS = ["a", "b", "c", "d"]
KEYS = [None, None, None, "k1", "k2"]
SEQUENCES = 120


def sequence(rng: random.Random, length: int) -> list[tuple[Any, ...]]:
    ops: list[tuple[Any, ...]] = [("put", IDS[: rng.randrange(1, len(IDS) + 1)])]
    for _ in range(length):
        kind = rng.choices(
            ["lease", "release", "renew", "tick", "retire", "revive", "delete", "put"],
            weights=[8, 6, 2, 3, 1, 1, 1, 1],
        )[0]
        if kind == "lease":
            ops.append(("lease", rng.choice([1, 1, 2]), rng.choice(KEYS)))
        elif kind == "release":
            outcome = rng.choice(["ok", "none", "blocked", "blocked"])
            cookie = rng.choice([None, "x", "y"])
            ops.append(("release", rng.randrange(8), outcome, cookie))
        elif kind == "renew":
            ops.append(("renew", rng.randrange(8)))
        elif kind == "tick":
            ops.append(("tick", rng.choice([1.0, 5.0, 31.0, 61.0])))
        elif kind == "put":
            ops.append(("put", [rng.choice(IDS)]))
        else:
            ops.append((kind, rng.choice(IDS)))
    return ops


async def run(
    backend: Backend, pool: str, ops: list[tuple[Any, ...]], manual: ManualClock
) -> list[Any]:
    ids = backend.identities
    held: list[IdentityLease] = []
    trace: list[Any] = []
    for op in ops:
        kind = op[0]
        if kind == "put":
            trace.append(await ids.put(pool, [parse_identity({"id": i}) for i in op[1]]))
        elif kind == "lease":
            got = await ids.lease(pool, lease_seconds=30, max_concurrency=op[1], key=op[2])
            if got is not None:
                held.append(got)
            trace.append(None if got is None else got.identity.id)
        elif kind in ("release", "renew"):
            if not held:
                trace.append(None)
                continue
            lease = held.pop(op[1] % len(held)) if kind == "release" else held[op[1] % len(held)]
            if kind == "renew":
                trace.append(await ids.renew(pool, lease.identity.id, lease.token, 30))
                continue
            cookies = None
            if op[3] is not None:
                cookies = [{"name": op[3], "value": str(manual.time()), "domain": "d.test"}]
            trace.append(
                await ids.release(
                    pool,
                    lease.identity.id,
                    lease.token,
                    outcome=op[2],
                    reason="r",
                    cookies=cookies,
                    cooldown_seconds=60,
                    retire_after=2,
                )
            )
        elif kind == "tick":
            manual.advance(op[1])
            trace.append(("tick", op[1]))
        else:
            trace.append(await getattr(ids, kind)(pool, op[1]))
    page = await ids.page(pool, limit=50)
    trace.append(page.counts)
    trace.append(page.blocks)
    trace.append(
        [
            (
                i.id,
                i.state,
                i.leases,
                i.cooling_until,
                i.stats.to_dict(),
                [c["name"] for c in i.cookies],
            )
            for i in page.items
        ]
    )
    return trace


async def test_identities_agree_on_sqlite_and_redis(tmp_path: Path, redis_url: str) -> None:
    sq = await open_backend(f"sqlite:///{tmp_path / 'ids.db'}")
    rd = await open_backend(redis_url)
    leased = blocked = 0
    try:
        for seed in range(SEQUENCES):
            rng = random.Random(seed)
            ops = sequence(rng, rng.randrange(5, 40))
            pool = f"diff-{seed}"
            results = []
            for backend in (sq, rd):
                # Both start at the same stopped time: every deadline and cool-down is equal.
                with clock.frozen(1_800_000_000.0 + seed) as manual:
                    results.append(await run(backend, pool, ops, manual))
            assert results[0] == results[1], (seed, ops, results)
            leased += sum(1 for step in results[0][:-3] if isinstance(step, str))
            blocked += results[0][-2]
    finally:
        await sq.close()
        await rd.close()
    # The sequences did lease, and blocks did cool identities down and retire some.
    assert leased > SEQUENCES and blocked > SEQUENCES // 4, (leased, blocked)
