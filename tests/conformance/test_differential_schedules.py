"""Differential: the schedule store on SQLite (``sqlite/schedules.py``; memory:// runs
the same) against Redis (``lua/schedules.lua``), on the same random sequences of puts,
compare-and-set swaps, deletes and due reads, across two types, with due times that
tie. What must agree: every answer, the order of ``due`` (earliest first, ties in one
written order), its limit, ``next_due``, listings, and disabled schedules never due.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import redis

from fleet.backends import open_backend
from fleet.backends.base import Backend

TYPES = ["sa", "sb"]
IDS = ["s1", "s2", "s3", "s4"]
DUES: list[float | None] = [None, 100.0, 100.0, 150.0, 200.0]
SEQUENCES = 150


def _raw(rng: random.Random, sid: str) -> str:
    return json.dumps({"id": sid, "every": rng.choice([10, 60]), "v": rng.randrange(3)})


def sequence(rng: random.Random, length: int) -> list[tuple[Any, ...]]:
    ops: list[tuple[Any, ...]] = []
    for _ in range(length):
        kind = rng.choices(
            ["put", "swap", "get", "list", "delete", "due", "next"], weights=[6, 3, 1, 1, 1, 3, 1]
        )[0]
        t, sid = rng.choice(TYPES), rng.choice(IDS)
        if kind == "put":
            ops.append(("put", t, sid, _raw(rng, sid), rng.choice(DUES)))
        elif kind == "swap":
            # expected: the stored text (by a marker: taken from the run) or another
            ops.append(("swap", t, sid, rng.random() < 0.6, _raw(rng, sid), rng.choice(DUES)))
        elif kind in ("get", "delete"):
            ops.append((kind, t, sid))
        elif kind == "list":
            ops.append(("list", t))
        elif kind == "due":
            ops.append(("due", rng.choice([50.0, 100.0, 160.0, 300.0]), rng.choice([1, 2, 10])))
        else:
            ops.append(("next",))
    return ops


async def run(b: Backend, prefix: str, ops: list[tuple[Any, ...]]) -> list[Any]:
    out: list[Any] = []
    store = b.schedules
    for op in ops:
        kind = op[0]
        if kind == "put":
            await store.put_raw(prefix + op[1], op[2], op[3], op[4])
            out.append(None)
        elif kind == "swap":
            stored = await store.get_raw(prefix + op[1], op[2])
            expected = stored if op[3] and stored is not None else '{"not": "it"}'
            out.append(await store.swap_raw(prefix + op[1], op[2], expected, op[4], op[5]))
        elif kind == "get":
            out.append(await store.get_raw(prefix + op[1], op[2]))
        elif kind == "list":
            out.append(sorted((await store.listing_raw(prefix + op[1])).items()))
        elif kind == "delete":
            out.append(await store.delete(prefix + op[1], op[2]))
        elif kind == "due":
            due = await store.due_raw(op[1], op[2])
            out.append([(t.removeprefix(prefix), sid, raw) for t, sid, raw in due])
        else:
            out.append(await store.next_due())
    return out


async def test_schedule_stores_agree_on_sqlite_and_redis(tmp_path: Path, redis_url: str) -> None:
    due_reads = 0
    for seed in range(SEQUENCES):
        rng = random.Random(seed)
        ops = sequence(rng, rng.randrange(4, 30))
        results = []
        # A fresh store each: due and next_due read every type of the store.
        for url in (f"sqlite:///{tmp_path / f's{seed}.db'}", redis_url):
            if url == redis_url:
                raw = redis.Redis.from_url(redis_url)
                raw.flushdb()
                raw.close()
            b = await open_backend(url)
            try:
                results.append(await run(b, f"d{seed}-", ops))
            finally:
                await b.close()
        assert results[0] == results[1], (seed, ops, results)
        due_reads += sum(1 for op in ops if op[0] == "due")
    assert due_reads > SEQUENCES  # the sequences did read due schedules
