"""What a type needs of the fleet: the desired_workers rule and the rate book as
plain values, then against a known arrival rate with a real worker process and a
master reading its queue (SQLite and Redis)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from fleet.backends import open_backend
from fleet.core.demand import RateBook, desired_workers, worker_rate
from tests.master.conftest import ADMIN, auth, settings_for, start_in_process
from tests.worker.procs import WorkerProcess
from tests.worker.support import push, push_config, state_of, wait_until


@pytest.mark.parametrize(
    ("pending", "processing", "arrival", "rate", "workers", "want"),
    [
        (0, 0, 0.0, 10.0, 3, 0),  # nothing at all: scale to zero
        (0, 0, 0.0, None, 0, 0),
        (5, 0, 0.0, None, 0, 1),  # work and nobody to measure: one worker
        (5, 0, 0.0, None, 4, 4),  # not measured yet: keep what runs
        (0, 2, 0.0, 10.0, 1, 1),  # tasks in flight keep their worker
        (0, 0, 10.0, 10.0, 1, 1),  # exactly one worker's rate
        (0, 0, 10.5, 10.0, 1, 2),
        (0, 0, 25.0, 10.0, 1, 3),
        (600, 0, 10.0, 10.0, 1, 2),  # 10/s arriving + 600 to clear in 60 s = 20/s
        (6000, 0, 0.0, 10.0, 1, 10),
        (0, 0, 0.01, 10.0, 0, 1),  # a trickle still needs one
    ],
)
def test_desired_workers(
    pending: int, processing: int, arrival: float, rate: float | None, workers: int, want: int
) -> None:
    got = desired_workers(
        pending=pending,
        processing=processing,
        arrival_rate=arrival,
        worker_rate=rate,
        workers=workers,
    )
    assert got == want


def test_worker_rate_is_a_busy_slot_times_the_slots_per_worker() -> None:
    assert worker_rate(5.0, 8, 2) == 20.0
    assert worker_rate(None, 8, 2) is None
    assert worker_rate(5.0, 0, 0) is None


def test_rate_book() -> None:
    book = RateBook()
    assert book.rates("t", 100.0, 0, 0) == (None, None)
    assert book.rates("t", 100.4, 4, 1) == (None, None)  # under a second
    assert book.rates("t", 102.0, 20, 10) == (10.0, 5.0)
    # Reads older than the window fall out of it.
    for i in range(1, 80):
        book.rates("t", 102.0 + i, 20 + 3 * i, 10 + i)
    arrival, completion = book.rates("t", 182.0, 20 + 3 * 80, 10 + 80)
    assert arrival == pytest.approx(3.0) and completion == pytest.approx(1.0)
    # A type deleted and started over: its counters went back.
    assert book.rates("t", 183.0, 2, 0) == (None, None)
    assert book.rates("other", 183.0, 7, 7) == (None, None)


E = "wt-echo"
ARRIVALS_PER_SECOND = 15.0
SLOTS = 2
TASK_SECONDS = 0.2


@pytest.mark.slow
async def test_desired_workers_against_a_known_arrival_rate(
    shared_url: str, tmp_path: Path
) -> None:
    """15 tasks/s arrive at a worker of 2 slots that each finish 5/s (0.2 s tasks):
    one worker does 10/s, so the fleet needs 2 (a backlog that grows 5/s adds
    little within a minute)."""
    backend = await open_backend(shared_url)
    master, lifespan = await start_in_process(settings_for(shared_url), sweeper=False)
    w = WorkerProcess(shared_url, "tests.plugins_fixture.echo", E, "dw-1", tmp_path)
    try:
        await push_config(backend, E, {"slots": SLOTS}, ["dw-1"])

        async def running() -> bool:
            assert w.proc.poll() is None, w.log()
            s = await state_of(backend, E, "dw-1")
            return s.get("state") == "RUNNING" and s.get("slots") == str(SLOTS)

        await wait_until(running, timeout=30, what="the worker RUNNING with 2 slots")

        async def row() -> dict[str, object]:
            r = await master.client.get("/api/v1/automations", headers=auth(ADMIN))
            assert r.status_code == 200, r.text
            (found,) = [x for x in r.json() if x["type"] == E]
            demand = found["demand"]
            assert isinstance(demand, dict)
            return demand

        first = await row()
        assert first["arrival_rate"] is None  # one read: no rate yet
        started = time.monotonic()
        sent = 0
        while (elapsed := time.monotonic() - started) < 5.0:
            due = int(elapsed * ARRIVALS_PER_SECOND) + 1
            if due > sent:
                await push(
                    backend, E, *[{"n": i, "sleep": TASK_SECONDS} for i in range(due - sent)]
                )
                sent = due
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)  # a heartbeat with both slots busy
        got = await row()
        arrival, slot_rate = got["arrival_rate"], got["slot_rate"]
        assert isinstance(arrival, float) and isinstance(slot_rate, float), got
        assert arrival == pytest.approx(ARRIVALS_PER_SECOND * 5 / 5.5, rel=0.2), got
        assert slot_rate == pytest.approx(1 / TASK_SECONDS, rel=0.3), got
        assert (got["workers"], got["slots"]) == (1, SLOTS)
        assert got["desired_workers"] == 2, got
        # /metrics says the same (its own read of the rates, a moment later).
        text = (await master.client.get("/metrics", headers=auth(ADMIN))).text
        assert f'fleet_desired_workers{{type="{E}"}} 2.0' in text, text
        for name in ("fleet_queue_arrival_rate", "fleet_slot_throughput", "fleet_queue_pending"):
            assert f'{name}{{type="{E}"}}' in text
    finally:
        w.close()
        await master.client.aclose()
        await lifespan.__aexit__(None, None, None)
        await backend.close()
