"""Poison neighbours, with real processes: a task that kills its worker process at the
start of ``run_one`` (``os._exit``, as an OOM kill would) ends in the DLQ after a
bounded number of deliveries, and the tasks reserved together with it (the other
slot's task, the feeder's prefetch), which die with the process each time, are not
dead-lettered for it: every one of them ends done.

One worker of ``chaos-job`` (``tests/chaos/plugin.py``, whose ledger counts every
start and finish) with 2 slots and the prefetch on, restarted after each death; the
test loop sweeps like a master does. Each death costs a visibility timeout (10 s,
the least ``BaseConfig`` allows) before the sweep hands the tasks out again.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from pathlib import Path

import pytest

from fleet.backends import open_backend
from tests.chaos.conftest import RESULTS
from tests.chaos.harness import TYPE, VISIBILITY, ChaosFleet, submit, verdict
from tests.support.waits import until
from tests.worker.support import state_of, wait_until

pytestmark = [pytest.mark.chaos, pytest.mark.slow, pytest.mark.timeout(200)]

MAX_ATTEMPTS = 3
NEIGHBOURS = 8


@pytest.fixture(params=["redis", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fleet.db'}"
    url: str = request.getfixturevalue("redis_url")
    return url


async def test_a_poison_task_does_not_take_its_neighbours_with_it(url: str, tmp_path: Path) -> None:
    fleet = ChaosFleet(url, tmp_path, slots=2)
    try:
        await fleet.configure(max_attempts=MAX_ATTEMPTS)
        worker = fleet.add_worker("a")
        async with await open_backend(url) as b:

            async def up() -> bool:
                return (await state_of(b, TYPE, "a")).get("state") in ("RUNNING", "IDLE")

            await wait_until(up, timeout=60, interval=0.2, what="worker up")
            # Submitted together: the poison is reserved with the first neighbour,
            # the others are prefetched behind them.
            payloads = [{"n": 0, "poison": True}]
            payloads += [{"n": i, "ms": 50} for i in range(1, NEIGHBOURS + 1)]
            poison, *neighbours = await submit(b, payloads)
            submitted = time.monotonic()
            deaths = 0
            last_sweep = 0.0

            async def settled() -> bool:
                """One look (restarting the worker the poison killed, sweeping as a
                master would): the poison dead and every neighbour done."""
                nonlocal deaths, last_sweep
                assert worker.proc is not None
                if worker.proc.poll() is not None:  # the poison killed it: restart it
                    fleet.killed.add(worker.proc.pid)
                    deaths += 1
                    assert deaths <= 2 * MAX_ATTEMPTS, "the poison was never dead-lettered"
                    worker.start()
                if time.monotonic() - last_sweep >= 0.5:
                    await b.queues.sweep(TYPE)
                    last_sweep = time.monotonic()
                states = [(await b.queues.state(TYPE, t)).state for t in (poison, *neighbours)]
                return states[0] == "dead" and all(s == "done" for s in states[1:])

            with contextlib.suppress(AssertionError):  # the checks below say what is missing
                await until(
                    settled,
                    timeout=(2 * MAX_ATTEMPTS + 1) * (VISIBILITY + 5),
                    interval=0.1,
                    what="the poison dead and its neighbours done",
                )
            dead = await b.queues.dead_peek(TYPE)
            states = {t: (await b.queues.state(TYPE, t)).state for t in neighbours}
            done = {t for t, s in states.items() if s == "done"}
            (poison_body,) = [d for d in dead if d.id == poison] or [None]
        starts, _ = fleet.ledger.read()
        deliveries = len(starts.get(poison, []))
        v = verdict("poison with neighbours", url.split(":")[0], fleet, [poison, *neighbours],
                    done, {d.id for d in dead}, time.monotonic() - submitted)  # fmt: skip
        RESULTS.append(v)
        print(
            f"\npoison: {deliveries} deliveries, {deaths} deaths; neighbour starts: "
            f"{dict(Counter(len(starts.get(t, [])) for t in neighbours))}; dead: "
            f"{[d.id for d in dead]}; attempts: {poison_body and poison_body.attempt}, "
            f"refunds: {poison_body and poison_body.refunds}"
        )
        assert [d.id for d in dead] == [poison], "only the poison is dead-lettered"
        assert poison_body is not None and poison_body.last_error is not None
        assert "earlier attempts were lost with their worker" in poison_body.last_error
        # Bounded: every death is one delivery, at most 2 x max_attempts of them.
        assert deaths == deliveries <= 2 * MAX_ATTEMPTS
        assert states == {t: "done" for t in neighbours}, states
        assert v.lost == 0 and v.unexplained == [], v
    finally:
        fleet.close()
