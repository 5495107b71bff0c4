"""The ``task_duration`` histogram: bucket arithmetic, the stats frame, and a
real worker's frames exported by a real master as ``fleet_task_duration_seconds``."""

from __future__ import annotations

import re

import httpx

from fleet.backends.base import Backend
from fleet.core.metrics import BUCKETS, Histogram
from fleet.master.app import create_app
from fleet.settings import Settings
from fleet.worker.stats import SlotStats, TypeCounters, stats_frame
from tests.plugins_fixture.echo import EchoAutomation
from tests.worker.support import push, running_worker, wait_until

T = "wt-echo"
TOKEN = "duration-admin-token"


def test_histogram_buckets_match_core_metrics_layout() -> None:
    h = Histogram()
    for seconds in (0.0, 0.005, 0.0051, 0.3, 60.0, 61.0, 1e9):
        h.observe(seconds)
    out = h.to_dict()
    assert len(out["buckets"]) == len(BUCKETS)
    # A value equal to a bound counts in that bucket, above 60 s only in +Inf.
    assert out["buckets"][BUCKETS.index(0.005)] == 2
    assert out["buckets"][BUCKETS.index(0.01)] == 1
    assert out["buckets"][BUCKETS.index(0.5)] == 1
    assert out["buckets"][BUCKETS.index(60)] == 1
    assert out["buckets"][-1] == 2
    assert out["count"] == 7 and sum(out["buckets"]) == 7
    assert out["sum"] == sum((0.0, 0.005, 0.0051, 0.3, 60.0, 61.0, 1e9))


def test_stats_frame_carries_durations_once_a_task_ran() -> None:
    counters = TypeCounters()
    slots = [SlotStats(slot=0, started_at=1.0)]

    def frame() -> dict[str, object]:
        return stats_frame(
            ts=2.0, slots=slots, counters=counters, per_second=0, cpu_percent=0, rss_bytes=0
        )

    assert "task_duration" not in frame()  # continuous types never run run_one
    counters.durations.observe(0.2)
    assert frame()["task_duration"] == {
        "count": 1,
        "sum": 0.2,
        "buckets": [1 if b == 0.25 else 0 for b in BUCKETS],
    }


def _sample(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample of the Prometheus text format, else None."""
    for line in text.splitlines():
        m = re.fullmatch(r"(\w+)\{(.*)\} (\S+)", line)
        if m is None or m.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        if found == labels:
            return float(m.group(3))
    return None


async def test_worker_durations_reach_the_master_metrics(mem: Backend) -> None:
    settings = Settings(backend_url=mem.url, admin_token=TOKEN, heartbeat_seconds=1.0)
    app = create_app(settings, backend=mem, sweeper=False, plugins=False)
    lifespan = app.router.lifespan_context(app)
    await lifespan.__aenter__()
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://m")
    try:
        async with running_worker(mem, [EchoAutomation], heartbeat_seconds=0.1) as worker:
            # Three runs of ~0.1 s, one of them failing once (its failed attempt counts too).
            await push(mem, T, {"n": 1, "sleep": 0.1}, {"n": 2, "sleep": 0.1})
            await push(mem, T, {"n": 3, "sleep": 0.1, "fail_times": 1})
            text = ""

            async def exported() -> bool:
                nonlocal text
                r = await client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
                assert r.status_code == 200
                text = r.text
                return _sample(text, "fleet_task_duration_seconds_count", type=T) == 4.0

            await wait_until(exported, timeout=20, what="4 durations on /metrics")
            assert worker.runners[T].env.counters.durations.count == 4
        name = "fleet_task_duration_seconds_bucket"
        assert _sample(text, name, type=T, le="0.05") == 0.0  # every run slept 0.1 s
        assert _sample(text, name, type=T, le="+Inf") == 4.0
        total = _sample(text, "fleet_task_duration_seconds_sum", type=T)
        assert total is not None and 0.4 <= total < 4.0
    finally:
        await client.aclose()
        await lifespan.__aexit__(None, None, None)
