"""The master while its Redis is down: /readyz 503, API 503, no 500; recovery after;
one log line per outage; ``fleet master`` started before its Redis waits for it."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleet.backends.waiting import open_when_reachable
from fleet.core import outage
from tests.master.conftest import ADMIN, auth
from tests.master.plugins import SCRAPE
from tests.support.master_proc import MasterProcess
from tests.support.redis_server import REDIS_BIN, RedisServer, free_port
from tests.support.waits import until
from tests.worker.support import wait_until

pytestmark = pytest.mark.skipif(REDIS_BIN is None, reason="redis-server not installed")


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    yield server
    server.cleanup()


OUTAGE = re.compile(r"^(?P<component>.+?): backend (?P<what>down|still down|back) ")


def outage_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, str]]:
    """(component, down|still down|back, line) of each outage line, in order. One
    outage is one line per process whichever loop notices first (API, catalog keeper,
    event hub...), and one back line whichever loop succeeds first."""
    out = []
    for r in caplog.records:
        m = OUTAGE.match(r.getMessage())
        if m:
            out.append((m["component"], m["what"], r.getMessage()))
    return out


async def _readyz_until(client: httpx.AsyncClient, status: int) -> httpx.Response:
    """``/readyz`` once it answers ``status``, within 2 s (its probe is cached 1 s)."""
    last: list[httpx.Response] = []

    async def answered() -> bool:
        last[:] = [await client.get("/readyz")]
        return last[0].status_code == status

    try:
        await until(answered, timeout=2.0, interval=0.05)
    except AssertionError:
        raise AssertionError((last[0].status_code, last[0].text)) from None
    return last[0]


async def test_backend_outage_is_503_and_recovers(
    live_factory: Any,
    own_redis: RedisServer,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.WARNING, logger="fleet")
    # The process's outage board is shared by every master a test process started: an
    # outage another test left (one that named no backend) must not become this one's.
    monkeypatch.setattr(outage, "PROCESS_OUTAGES", outage.OutageBoard())
    live = live_factory(own_redis.url, sweeper=False, catalog_check_seconds=0.2)
    tasks = f"/api/v1/automations/{SCRAPE}/tasks"
    async with httpx.AsyncClient(base_url=live.url, headers=auth(ADMIN), timeout=30) as client:
        assert (await client.get("/readyz")).status_code == 200
        own_redis.stop()
        # /readyz answers from a probe at most a second old (issue 40): down within 2.
        r = await _readyz_until(client, 503)
        assert r.json()["backend"] == "down"
        assert (await client.get("/healthz")).status_code == 200
        for _ in range(3):
            r = await client.post(tasks, json={"payload": {"url": "u"}})
            assert r.status_code == 503, r.text
        # Three 503s, one line (not one warning per request, nor one per loop).
        ((_, what, down),) = outage_lines(caplog)
        assert what == "down" and f"backend down (redis at {own_redis.url} is unavailable" in down
        r = await client.get("/metrics")
        assert r.status_code == 200 and "fleet_backend_up 0.0" in r.text
        own_redis.start()
        await _readyz_until(client, 200)
        # The catalog lived in the Redis that went away (no persistence); the master
        # re-publishes the entries of its own plugins, so submits work again.

        async def republished() -> bool:
            return (await client.get(f"/api/v1/catalog/{SCRAPE}")).status_code != 404

        await until(republished, interval=0.05, what="the catalog entry re-published")
        r = await client.post(tasks, json={"payload": {"url": "u"}})
        assert r.status_code == 202
        await wait_until(lambda: len(outage_lines(caplog)) == 2, timeout=10, what="back line")
        assert outage_lines(caplog)[1][1] == "back"


async def test_event_stream_says_why_it_ends(
    live_factory: Any, own_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.master.test_metrics_events import EventReader

    caplog.set_level(logging.WARNING, logger="fleet")
    live = live_factory(own_redis.url, sweeper=False)
    async with httpx.AsyncClient(base_url=live.url, headers=auth(ADMIN), timeout=30) as client:
        async with client.stream("GET", "/api/v1/events?interval=0.2") as response:
            events = EventReader(response)
            await events.next("hello")
            own_redis.stop()
            error = await events.next("error")
            assert "backend unavailable" in error["detail"]
        for _ in range(2):  # dashboards reconnect at once: still the one line
            async with client.stream("GET", "/api/v1/events?interval=0.2") as response:
                error = await EventReader(response).next("error")
                assert "backend unavailable" in error["detail"]
        (down,) = outage_lines(caplog)
        assert down[:2] == ("event hub", "down")
        own_redis.start()
        async with client.stream("GET", "/api/v1/events?interval=0.2") as response:
            await EventReader(response).next("hello")
        _, back = outage_lines(caplog)
        assert back[:2] == ("event hub", "back")


async def test_waiting_names_the_backend_without_its_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"redis://:s3cret@127.0.0.1:{free_port()}/0"  # nothing listens there
    logger = logging.getLogger("fleet.test.waiting")
    waiting = asyncio.create_task(open_when_reachable(url, "master", logger))
    try:
        await wait_until(lambda: bool(caplog.records), timeout=10, what="the first line")
        await asyncio.sleep(1.2)  # a few more attempts: still that one line
    finally:
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
    (record,) = caplog.records
    line = record.getMessage()
    assert "s3cret" not in line and "redis://:********@127.0.0.1:" in line
    assert line.startswith("master: backend down (") and "FLEET_BACKEND_URL" in line
    assert record.exc_info is None


def log_lines(master: MasterProcess) -> list[str]:
    """The master's output without uvicorn's own INFO lines."""
    return [line for line in master.log().splitlines() if not line.startswith("INFO:")]


async def test_fleet_master_waits_for_its_backend(tmp_path: Path) -> None:
    redis = RedisServer()
    redis.start()
    redis.stop()  # a port of our own that nothing listens on, until we start it again
    master = MasterProcess(redis.url, tmp_path)
    try:
        await wait_until(lambda: "backend down" in master.log(), timeout=20, what="the outage line")
        await asyncio.sleep(1.5)  # several retries: still one line, still waiting
        assert master.proc.poll() is None, master.log()
        assert "Traceback" not in master.log()
        lines = log_lines(master)
        (down,) = [line for line in lines if "backend down" in line]
        assert f"master: backend down (redis at {redis.url} is unavailable" in down
        assert "check that it is running" in down and "waiting for it" in down
        assert len(lines) <= 3, lines  # the banner, the outage line (, the token file)
        async with master.client() as http:
            with pytest.raises(httpx.ConnectError):
                await http.get("/healthz")
            redis.start()  # same port

            async def healthy() -> bool:
                try:
                    return (await http.get("/healthz")).status_code == 200
                except httpx.HTTPError:
                    return False

            await wait_until(healthy, timeout=20, what="/healthz once Redis is up")
            assert (await http.get("/readyz")).status_code == 200
        assert "master: backend back after" in master.log()
        assert master.interrupt() == 0
        assert "Traceback" not in master.log()
    finally:
        master.close()
        redis.cleanup()


async def test_ctrl_c_while_waiting_exits_without_a_traceback(tmp_path: Path) -> None:
    master = MasterProcess(f"redis://127.0.0.1:{free_port()}/0", tmp_path)
    try:
        await wait_until(lambda: "backend down" in master.log(), timeout=20, what="the outage line")
        assert master.interrupt() == 130
        assert "Traceback" not in master.log()
        assert "stopped while waiting for the backend" in master.log()
    finally:
        master.close()
