"""Differential: error groups on SQLite (``sqlite/errors.py``, the pure rules of
:mod:`fleet.core.error_groups` in Python; memory:// runs the same) against Redis (their
only other copy, ``lua/errors.lua``), and both against the pure rules run here, on the
same random sequences under one stopped clock.

A sequence records deltas (groups, counts, times before and after the stored ones,
domains past the cap), puts snapshots (ids again, sizes near the budget, more than a
group keeps) and moves the clock (past the TTL too). Every group, with its snapshots
in order, must be the same three times.
"""

from __future__ import annotations

import random
from typing import Any

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.backends.redis import errors as redis_errors
from fleet.backends.sqlite import errors as sqlite_errors
from fleet.core import clock
from fleet.core.clock import ManualClock
from fleet.core.error_groups import (
    TTL_SECONDS,
    ErrorGroup,
    GroupDelta,
    Held,
    Sample,
    Snapshot,
    SnapshotMeta,
    evicted,
    expired,
    merged,
)
from fleet.core.records import now

TYPE = "diff-errors"
GROUPS = [f"{i:016x}" for i in range(4)]
BUDGET = 1000
PER_GROUP = 2
SEQUENCES = 40


def ops(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for _ in range(n):
        kind = rng.choices(["record", "put", "tick"], [5, 4, 2])[0]
        if kind == "record":
            deltas = [
                (
                    rng.choice(GROUPS),
                    rng.randint(1, 5),
                    rng.choice([-3.0, -0.5, 0.0, 0.25]),
                    tuple(rng.sample([f"d{i}.test" for i in range(25)], rng.randint(0, 22))),
                    f"t{rng.randint(0, 9)}",
                )
                for _ in range(rng.randint(1, 3))
            ]
            out.append(("record", deltas))
        elif kind == "put":
            out.append(
                (
                    "put",
                    rng.choice(GROUPS),
                    f"{rng.randint(0, 5):x}",
                    rng.choice([1, 50, 300, 700, 999, 1001]),
                )
            )
        else:
            out.append(("tick", rng.choice([0.0, 0.5, 3.0, TTL_SECONDS / 2, TTL_SECONDS + 1])))
    return out


class Model:
    """The pure rules alone."""

    def __init__(self) -> None:
        self.groups: dict[str, ErrorGroup] = {}
        self.snaps: dict[tuple[str, str], Held] = {}

    def prune(self, at: float) -> None:
        self.groups = {g: v for g, v in self.groups.items() if not expired(v.last_seen, at)}
        self.snaps = {k: h for k, h in self.snaps.items() if not expired(h.taken_at, at)}

    def record(self, deltas: list[GroupDelta], at: float) -> None:
        self.prune(at)
        for d in deltas:
            self.groups[d.group] = merged(self.groups.get(d.group), d)

    def put(self, group: str, sid: str, size: int, at: float) -> None:
        self.prune(at)
        self.snaps.pop((group, sid), None)
        keep, gone = evicted(
            list(self.snaps.values()),
            Held(group, sid, at, size),
            per_group=PER_GROUP,
            budget=BUDGET,
        )
        if keep:
            for k in gone:
                del self.snaps[k]
            self.snaps[(group, sid)] = Held(group, sid, at, size)

    def view(self, at: float) -> dict[str, Any]:
        self.prune(at)
        return {
            g: (
                v.count,
                v.first_seen,
                v.last_seen,
                v.domains,
                v.sample.task_id,
                sorted(
                    ((h.taken_at, h.id) for h in self.snaps.values() if h.group == g), reverse=True
                ),
            )
            for g, v in self.groups.items()
        }


async def view(b: Backend) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for g in GROUPS:
        got = await b.errors.get(TYPE, g)
        if got is not None:
            out[g] = (
                got.count,
                got.first_seen,
                got.last_seen,
                got.domains,
                got.sample.task_id,
                [(s.taken_at, s.id) for s in got.snapshots],
            )
    return out


async def test_sqlite_redis_and_the_rules_agree(
    redis_url: str, tmp_path: Any, frozen: ManualClock, monkeypatch: Any
) -> None:
    # A small budget and bound in both engines (the rule takes them as arguments).
    real_put = redis_errors.put_argv
    monkeypatch.setattr(
        redis_errors, "put_argv", lambda g, s, at: real_put(g, s, at, PER_GROUP, BUDGET)
    )
    real_evicted = evicted
    monkeypatch.setattr(
        sqlite_errors,
        "evicted",
        lambda held, new: real_evicted(held, new, per_group=PER_GROUP, budget=BUDGET),
    )
    rng = random.Random(47)
    for n in range(SEQUENCES):
        sq = await open_backend(f"sqlite:///{tmp_path}/d{n}.db")
        rd = await open_backend(redis_url)
        await rd.errors.forget(TYPE)
        model = Model()
        try:
            for op in ops(rng, 25):
                at = now()
                if op[0] == "tick":
                    frozen.advance(op[1])
                    continue
                if op[0] == "record":
                    deltas = [
                        GroupDelta(
                            g,
                            "E",
                            "m <n>",
                            "f.py:g",
                            c,
                            at + dt,
                            at + max(dt, 0.0),
                            doms,
                            Sample(task),
                        )
                        for g, c, dt, doms, task in op[1]
                    ]
                    for b in (sq, rd):
                        await b.errors.record(TYPE, deltas)
                    model.record(deltas, at)
                else:
                    _, g, sid, size = op
                    snap = Snapshot(SnapshotMeta(sid, at, html_bytes=size), b"x" * size)
                    for b in (sq, rd):
                        await b.errors.put(TYPE, g, snap)
                    model.put(g, sid, size, at)
                want = model.view(now())
                assert await view(sq) == want, (n, op)
                assert await view(rd) == want, (n, op)
        finally:
            await sq.close()
            await rd.close()
    assert clock.now() > 0
