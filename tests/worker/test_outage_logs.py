"""An 8 s Redis outage, as a real worker and a real master log it: one line per
process when it loses the backend, one when it is back — however many of its loops
(feeder, heartbeat, event subscription, slots, sweeper, API...) noticed — never a
traceback."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core.outage import SETTLE_SECONDS
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


def outage_lines(log: str) -> list[str]:
    """The process's outage lines, in order: ``down``, ``still`` or ``back`` each."""
    return [m["what"] for line in log.splitlines() if (m := OUTAGE_LINE.match(line))]


def assert_readable(log: str) -> list[str]:
    """No traceback; the process said down, then back, and at most 3 lines in all (an
    8 s outage is shorter than the 30 s between two "still down" lines). Returns the
    outage lines, in order."""
    assert "Traceback" not in log, log
    ordered = outage_lines(log)
    assert len(ordered) <= 3, log
    assert ordered[0] == "down" and ordered[-1] == "back", (ordered, log)
    counts = Counter(ordered)
    assert counts["down"] == 1 and counts["back"] == 1, (ordered, log)
    return ordered


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
        return (await backend.queues.state(ECHO, task_id)).state == "done"
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

            def back_in(log: str) -> bool:
                return "back" in outage_lines(log)

            try:
                await wait_until(lambda: back_in(worker.log()), timeout=20, what="worker back")
                await wait_until(lambda: back_in(master.log()), timeout=10, what="master back")
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{worker.log()}\n{master.log()}") from None
            # Loops that retry slowly (the feeder's blocking reserve, the event
            # subscription's backoff) come back later: they must not add lines.
            await asyncio.sleep(SETTLE_SECONDS + 3)
        worker_lines = assert_readable(worker.log())
        master_lines = assert_readable(master.log())
        for name, proc, lines in (
            ("worker", worker, worker_lines),
            ("master", master, master_lines),
        ):
            shown = [line for line in proc.log().splitlines() if OUTAGE_LINE.match(line)]
            print(f"{name}: {len(lines)} outage lines", *shown, sep="\n  ")
    finally:
        worker.close()
        master.close()
