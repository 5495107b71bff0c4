"""A live worker whose own stored record is corrupt rewrites it within a heartbeat or
two (registration, state, stats, the desired config and its generation, the type's
catalog entry), and a corrupt desired config never crashes its loops; on every
backend, with the record planted straight into the storage."""

from __future__ import annotations

import logging

import pytest

from fleet.backends.base import Backend
from fleet.core.stored import entry_unreadable
from tests.plugins_fixture.echo import EchoAutomation
from tests.support.corrupt import NOT_UTF8, WORKER_PARTS, Planter
from tests.worker.support import push, running_worker, wait_until

E = "wt-echo"
HEARTBEAT = 0.2
#: A few heartbeats: what "within a heartbeat" may take on a loaded CI machine.
HEAL_SECONDS = 4.0


async def _intact(backend: Backend, worker_id: str, gen: int) -> bool:
    record = await backend.workers.get(E, worker_id)
    entry = await backend.catalog.get(E)
    return (
        record is not None
        and record.unreadable == ()
        and record.gen == gen
        and record.config is not None
        and record.stats is not None
        and record.state.get("applied_gen") == str(gen)
        and entry is not None
        and entry_unreadable(entry) is None
    )


@pytest.mark.parametrize(
    "parts", [("config",), ("gen",), ("state", "stats"), (*WORKER_PARTS, "catalog")]
)
async def test_a_worker_rewrites_its_own_corrupt_record(
    backend: Backend, parts: tuple[str, ...], caplog: pytest.LogCaptureFixture
) -> None:
    planter = Planter(backend.url)
    async with running_worker(backend, [EchoAutomation], heartbeat_seconds=HEARTBEAT) as worker:
        runner = worker.runners[E]
        await wait_until(lambda: runner.held_gen > 0, what="a config applied")
        gen = runner.held_gen
        await wait_until(lambda: _intact(backend, "w1", gen), what="the record written")
        caplog.clear()
        for part in parts:
            if part == "catalog":
                planter.catalog(E, "{not json")
            else:
                planter.worker(E, "w1", part, NOT_UTF8 if part == "config" else "garbage")
        record = await backend.workers.get(E, "w1")
        assert record is not None
        assert set(record.unreadable) == set(parts) - {"catalog"}

        await wait_until(
            lambda: _intact(backend, "w1", gen), timeout=HEAL_SECONDS, what="the record rewritten"
        )
        assert runner.held_gen == gen  # what it runs did not change
        assert await backend.configs.desired(E, "w1") == (runner.raw_config, gen)
        (task_id,) = await push(backend, E, {"n": 1})

        async def done() -> bool:
            return (await backend.queues.state(E, task_id)).state == "done"

        await wait_until(done, what="a task to run after the repair")
    failed = [
        r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "fail" in r.msg
    ]
    assert failed == []  # no loop of the worker failed on the corrupt record


async def test_a_worker_starts_over_a_corrupt_desired_config(backend: Backend) -> None:
    await backend.workers.register(E, "w1", {"host": "h"})
    assert await backend.configs.put_desired(E, "w1", {"slots": 1}, 7)
    Planter(backend.url).worker(E, "w1", "config", "{not json")
    async with running_worker(backend, [EchoAutomation], heartbeat_seconds=HEARTBEAT) as worker:
        runner = worker.runners[E]
        await wait_until(lambda: runner.held_gen > 0, what="a config applied")
        assert runner.error is None and len(runner.slots) == 1
        stored, gen = await backend.configs.desired(E, "w1")
        assert stored is not None and gen == runner.held_gen
