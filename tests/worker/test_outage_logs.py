"""An 8 s Redis outage, as a real worker and a real master log it: one line per
component when it goes down, one when it is back, never a traceback."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from tests.support.master_proc import MasterProcess
from tests.support.redis_server import REDIS_BIN, RedisServer
from tests.worker.procs import WorkerProcess
from tests.worker.support import push, state_of, wait_until

pytestmark = pytest.mark.slow

ECHO = "wt-echo"
TICKER = "wt-ticker"
OUTAGE_SECONDS = 8.0
#: "<time> <LEVEL> <logger>: <component>: backend down|still down|back ..."
OUTAGE_LINE = re.compile(r"^\S+ +\S+ +\S+: (?P<component>.+?): backend (?P<what>down|still|back) ")


def outage_lines(log: str) -> dict[str, list[str]]:
    """Each component's outage lines, in order: ``down``, ``still``, ``back``."""
    found: dict[str, list[str]] = {}
    for line in log.splitlines():
        m = OUTAGE_LINE.match(line)
        if m:
            found.setdefault(m["component"], []).append(m["what"])
    return found


def assert_readable(log: str, *, must_recover: set[str]) -> None:
    """No traceback; every component said down then back (at most 6 lines each)."""
    assert "Traceback" not in log, log
    per_component = outage_lines(log)
    assert must_recover <= set(per_component), (per_component, log)
    for component, whats in per_component.items():
        assert len(whats) <= 6, (component, whats, log)
        assert whats[0] == "down", (component, whats)
        counts = Counter(whats)
        assert counts["down"] == 1 and counts["back"] <= 1, (component, whats, log)
    for component in must_recover:
        assert per_component[component][-1] == "back", (component, per_component, log)


@pytest.fixture
def aof_redis() -> Iterator[RedisServer]:
    if REDIS_BIN is None:
        pytest.skip("redis-server not installed")
    server = RedisServer(aof=True)  # the queue survives the crash: the worker resumes it
    server.start()
    yield server
    server.cleanup()


async def task_done(url: str, task_id: str) -> bool:
    backend: Backend = await open_backend(url)
    try:
        return (await backend.task_state(ECHO, task_id)).state == "done"
    finally:
        await backend.close()


async def test_an_outage_reads_like_a_person_wrote_it(
    aof_redis: RedisServer, tmp_path: Path
) -> None:
    url = aof_redis.url
    ticker = ["--plugin", "tests.plugins_fixture.ticker", "--type", TICKER]
    echo = "tests.plugins_fixture.echo"
    worker = WorkerProcess(url, echo, ECHO, "out", tmp_path, more_args=ticker)
    master = MasterProcess(url, tmp_path)
    try:
        backend = await open_backend(url)
        try:

            async def worker_up() -> bool:
                states = [await state_of(backend, t, "out") for t in (ECHO, TICKER)]
                return all(s.get("state") == "RUNNING" for s in states)

            await wait_until(worker_up, timeout=20, what="worker running")
        finally:
            await backend.close()
        async with master.client() as http:

            async def master_ready() -> bool:
                try:
                    return (await http.get("/readyz")).status_code == 200
                except Exception:
                    return False

            await wait_until(master_ready, timeout=20, what="master ready")

            aof_redis.stop(kill=True)
            for _ in range(4):  # requests during the outage: 503 each, one log line in all
                assert (await http.get("/api/v1/catalog")).status_code == 503
                await asyncio.sleep(0.5)
            await asyncio.sleep(OUTAGE_SECONDS - 2)
            assert worker.proc.poll() is None and master.proc.poll() is None
            aof_redis.start()  # same port and data directory

            backend = await open_backend(url)
            try:
                (task_id,) = await push(backend, ECHO, {"n": 1})
            finally:
                await backend.close()
            await wait_until(lambda: task_done(url, task_id), timeout=20, what="task after outage")

            worker_components = {"heartbeat", "event subscription", f"{ECHO}: reserve"}
            worker_components.add(f"{TICKER}: slots")

            def worker_recovered() -> bool:
                lines = outage_lines(worker.log())
                return all(lines.get(c, ["?"])[-1] == "back" for c in worker_components)

            def master_recovered() -> bool:
                lines = outage_lines(master.log())
                return all(lines.get(c, ["?"])[-1] == "back" for c in ("sweeper", "API"))

            try:
                await wait_until(worker_recovered, timeout=20, what="the worker's back lines")
                await wait_until(master_recovered, timeout=10, what="the master's back lines")
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{worker.log()}\n{master.log()}") from None
        assert_readable(worker.log(), must_recover=worker_components)
        assert_readable(master.log(), must_recover={"sweeper", "API"})
    finally:
        worker.close()
        master.close()
