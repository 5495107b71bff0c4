"""Flow control with real processes: three ``fleet worker`` processes of ``flow-job``
over Redis and over SQLite, measured from the plugin's own ledger.

One run of about 35 s per backend checks, at once:

* concurrency never above the cap, per group, across the three workers (from each
  attempt's start and end times): the type's ``group_concurrency=2`` and a group's own
  ``concurrency=4``;
* a group with its own ``rate="5/s"``: starts over 30 s within 10 % of 150;
* a 5-task group submitted behind a 500-task group finishes while the big one is early;
* a paused group holds while the others drain, and runs once resumed;
* ``Throttled(retry_after=4)`` from one task holds its group on every worker for 4 s,
  and charges no attempt.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core.flow import GroupSettings
from fleet.core.records import PushRequest, TaskBody, new_id, now
from tests.support.fleet_procs import wait_up, worker_processes
from tests.worker.procs import fleet_env
from tests.worker.support import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

TYPE = "flow-job"
PLUGIN = "tests.flow.plugin"
WORKERS = ("w1", "w2", "w3")
RATE_WINDOW = 30.0


def requests(group: str | None, n: int, **payload: Any) -> list[PushRequest]:
    t = now()
    return [
        PushRequest(TaskBody(id=new_id(), payload={"n": i, **payload}, enqueued_at=t, group=group))
        for i in range(n)
    ]


def read_ledger(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """Most intervals open at one instant (an end at t closes before a start at t)."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    best = cur = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best


async def wait_done(b: Backend, ids: list[str], timeout: float) -> None:
    async def done() -> bool:
        for tid in ids:
            if (await b.queues.state(TYPE, tid)).state != "done":
                return False
        return True

    await wait_until(done, timeout=timeout, interval=0.5, what="every task done")


async def test_three_workers_keep_every_group_limit(shared_url: str, tmp_path: Path) -> None:
    url = shared_url
    ledger = tmp_path / "ledger.jsonl"
    env = fleet_env(FLEET_FLOW_LEDGER=str(ledger), FLEET_ENTRY_POINTS="0")
    async with await open_backend(url) as b:
        await b.configs.set(TYPE, {"slots": 6, "visibility_seconds": 30, "group_concurrency": 2})
        await b.groups.set(TYPE, "rated", GroupSettings(rate="5/s", concurrency=4))
        await b.groups.set(TYPE, "held", GroupSettings(paused=True))
        with worker_processes(url, PLUGIN, TYPE, WORKERS, tmp_path, env):
            await wait_up(b, TYPE, WORKERS)
            rated = await b.queues.push(TYPE, requests("rated", 160, ms=10))
            big = await b.queues.push(TYPE, requests("big", 500, ms=40))
            small = await b.queues.push(TYPE, requests("small", 5, ms=40))
            held = await b.queues.push(TYPE, requests("held", 10, ms=10))
            angry = await b.queues.push(TYPE, requests("angry", 1, ms=40, throttle=4.0))
            angry += await b.queues.push(TYPE, requests("angry", 5, ms=40))
            plain = await b.queues.push(TYPE, requests(None, 200, ms=20))
            # The paused group holds while the others drain; then it is resumed.
            await asyncio.sleep(15)
            assert (await b.groups.info(TYPE, "held")).pending == 10
            resumed_at = time.time()
            await b.groups.set(TYPE, "held", GroupSettings())
            every = [r.task_id for r in [*rated, *big, *small, *held, *angry, *plain]]
            await wait_done(b, every, timeout=90)
            for tid in (r.task_id for r in angry):
                assert (await b.queues.state(TYPE, tid)).attempt == 1  # Throttled charged nothing
            depths = await b.queues.depths(TYPE)
            assert depths.counters.throttled == 1

    rows = read_ledger(ledger)
    starts: dict[str, list[dict[str, Any]]] = defaultdict(list)
    spans: dict[str, dict[str, float]] = defaultdict(dict)
    for row in rows:
        key = f"{row['id']}#{row['pid']}#{row['attempt']}"
        if row["ev"] == "start":
            starts[row["group"] or ""].append(row)
            spans[key]["s"] = row["t"]
            spans[key]["g"] = row["group"] or ""  # type: ignore[assignment]
        else:
            spans[key]["e"] = row["t"]
    assert len({row["pid"] for row in rows}) == 3, "all three workers took tasks"

    # Concurrency, per group, across the workers.
    by_group: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for span in spans.values():
        by_group[str(span["g"])].append((span["s"], span["e"]))
    caps = {"rated": 4, "big": 2, "small": 2, "held": 2, "angry": 2}
    overlaps = {g: max_overlap(by_group[g]) for g in caps}
    print(f"\nmax running per group: {overlaps}")
    assert all(overlaps[g] <= cap for g, cap in caps.items()), overlaps
    assert overlaps["big"] == 2  # the cap is used, not just respected

    # The rate: starts of "rated" over 30 s from its first start.
    t_rated = sorted(r["t"] for r in starts["rated"])
    in_window = sum(1 for t in t_rated if t < t_rated[0] + RATE_WINDOW)
    print(f"rated: {in_window} starts in {RATE_WINDOW:.0f} s (target 150)")
    assert 135 <= in_window <= 165, in_window

    # The small group finishes while the big one is early.
    small_done = max(r["t"] for r in rows if r["group"] == "small" and r["ev"] == "end")
    big_ends_before = sum(
        1 for r in rows if r["group"] == "big" and r["ev"] == "end" and r["t"] <= small_done
    )
    print(f"small done after {big_ends_before} of 500 big tasks")
    assert big_ends_before < 50

    # The paused group started nothing before it was resumed, and everything after.
    assert min(r["t"] for r in starts["held"]) >= resumed_at - 0.5
    assert len(starts["held"]) == 10

    # Throttled: the group reserves nothing on any worker for 4 s. Only a task already
    # reserved beside the throttled one (the cap is 2) may still start meanwhile.
    (thr,) = [r for r in rows if r["ev"] == "throttled"]
    later = sorted(r["t"] - thr["t"] for r in starts["angry"] if r["t"] > thr["t"])
    print(f"angry: starts after the throttle at {[round(x, 2) for x in later]} s")
    held_back = [x for x in later if x < 3.8]
    assert len(held_back) <= 1 and all(x < 0.5 for x in held_back), later
