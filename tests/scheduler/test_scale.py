"""A thousand one-second schedules on one firer, on Redis and SQLite: it keeps up
(every schedule fires about once a second, none twice for one tick), says nothing per
schedule, and a tick's idempotency key ends with the schedule's period.

The firing rate itself is measured by ``bench/schedules.py`` (1,000 ticks/s on both);
this test holds the behaviour with margins a loaded CI machine keeps."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter

import pytest

from fleet.backends import open_backend
from fleet.core.schedule import new_record
from fleet.scheduler import ScheduleFirer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

TYPE = "scale-ticks"
SCHEDULES = 1000
SECONDS = 10.0


@pytest.fixture(params=["redis", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: object) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/ticks.db"
    value: str = request.getfixturevalue("redis_url")
    return value


async def test_a_thousand_one_second_schedules_keep_up(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with await open_backend(url) as b:
        t0 = time.time()
        for i in range(SCHEDULES):
            record = new_record(TYPE, f"s{i}", {"every_seconds": 1, "payload": {"i": i}}, now=t0)
            await b.schedules.put(record)
        firer = ScheduleFirer(b, "test")
        with caplog.at_level(logging.INFO, logger="fleet.scheduler"):
            start = time.time()
            firer.start()
            await asyncio.sleep(SECONDS)
            await firer.stop()
            elapsed = time.time() - start
        ids: list[str] = []
        while got := await b.queues.reserve(TYPE, k=1000):
            ids += [r.body.id for r in got]
        per_schedule = Counter(i.split(":")[1] for i in ids)
    assert len(set(ids)) == len(ids)  # one task per tick
    asked = SCHEDULES * elapsed
    assert len(ids) >= 0.8 * asked, (len(ids), asked)
    assert len(per_schedule) == SCHEDULES
    assert min(per_schedule.values()) >= 0.7 * elapsed, min(per_schedule.values())
    # No line per schedule: taking the lock, at most a summary.
    lines = [r for r in caplog.records if r.name == "fleet.scheduler"]
    assert len(lines) <= 3, [r.getMessage() for r in lines]
