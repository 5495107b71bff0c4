"""The history's numbers against a known workload (issue 42, item 4), over real HTTP
from a live master with its recorder off: each attempt counted once in the failure rate
(timeouts are among the failed, not added to them), percentiles answered with the
bucket that bounds them, the same summary in every window that holds the data, and
the counts as they are now (a read records first), not as the last pass left them."""

from __future__ import annotations

import time
from typing import Any

import httpx

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core.catalog import catalog_entry
from fleet.core.history import Reported
from fleet.core.metrics import BUCKETS
from fleet.core.records import PushRequest, TaskBody, now
from tests.master.conftest import ADMIN, auth
from tests.master.plugins import Scraper

TYPE = "hist-numbers"


async def _run(b: Backend, task_id: str, failures: int, *, dead: bool = False) -> None:
    """One task: ``failures`` failed attempts, then done (or dead on the last)."""
    body = TaskBody(id=task_id, payload={"url": "u"}, enqueued_at=now(), max_attempts=9)
    await b.queues.push(TYPE, [PushRequest(body)])
    for n in range(failures + 1):
        (res,) = await b.queues.reserve(TYPE, visibility_seconds=30)
        if n < failures:
            last = dead and n == failures - 1
            await b.queues.nack(TYPE, task_id, res.token, delay_seconds=0, error="x", dead=last)
            if last:
                return
        else:
            assert await b.queues.ack(TYPE, [(task_id, res.token)]) == [True]


async def _report(b: Backend, timed_out: int, durations: list[int]) -> None:
    await b.workers.register(TYPE, "w1", {"host": "h", "pid": 1})
    await b.workers.set_state(TYPE, "w1", {"state": "RUNNING", "last_seen": str(time.time())})
    hist = {"count": sum(durations), "sum": 1.0, "buckets": durations}
    await b.workers.put_stats(
        TYPE, "w1", {"tasks": {"timed_out": timed_out}, "task_duration": hist}
    )


async def _history(url: str, window: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=url, headers=auth(ADMIN)) as http:
        r = await http.get(f"/api/v1/automations/{TYPE}/history", params={"window": window})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def seed_workload(b: Backend) -> None:
    """The known workload, recorded from a baseline: 3 done, 2 failed, 1 dead, 2 timed
    out, 20 run times (19 between 30 and 60 s, 1 under a second)."""
    zeros = [0] * len(BUCKETS)
    await b.catalog.put(TYPE, catalog_entry(Scraper) | {"type": TYPE})
    await _report(b, 0, zeros)
    await b.history.record(TYPE, now(), Reported(0, tuple(zeros)))  # the baseline
    # The case: 2 done, 1 attempt failed then done... and one that timed out
    # twice (a failed attempt, then dead).
    await _run(b, "a", 0)
    await _run(b, "b", 0)
    await _run(b, "c", 1)
    await _run(b, "d", 2, dead=True)
    # the "~30 s" runs just over 30 s, and one under a second
    durations = list(zeros)
    durations[BUCKETS.index(60)] = 19
    durations[BUCKETS.index(1)] = 1
    await _report(b, 2, durations)


async def test_numbers_of_a_known_workload(live_factory: Any, sqlite_url: str) -> None:
    b = await open_backend(sqlite_url)
    try:
        await seed_workload(b)
        live = live_factory(sqlite_url, sweeper=False)  # no recorder: reads must record
        summaries = {w: (await _history(live.url, w))["summary"] for w in ("1h", "24h", "30d")}
    finally:
        await b.close()
    s = summaries["1h"]
    assert s["counts"]["completed"] == 3
    assert s["counts"]["failed"] == 2 and s["counts"]["dead"] == 1
    assert s["counts"]["timed_out"] == 2
    assert s["attempts"] == 6
    assert s["failure_rate"] == 0.5  # 3 of 6 attempts, not (2 + 1 + 2) / (3 + 5)
    assert s["runs"] == 20
    p95 = s["p95"]
    assert (p95["lower"], p95["upper"], p95["exact"]) == (30.0, 60.0, False)
    assert 30.0 < p95["value"] <= 60.0
    assert s["p50"]["lower"] == 30.0 and s["p50"]["upper"] == 60.0
    # the same data, the same answer, whichever window reads it
    assert summaries["24h"] == summaries["30d"] == s
