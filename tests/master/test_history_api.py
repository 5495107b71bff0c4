"""``GET /api/v1/automations/{type}/history`` over real HTTP: a master records a type's
counts and its workers' run times, restarts, and answers the same history; tokens and
windows are checked as on every per-type read."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
from click.testing import CliRunner

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.cli import main
from fleet.core.catalog import catalog_entry
from fleet.core.history import Reported
from fleet.core.metrics import BUCKETS
from fleet.core.records import PushRequest, TaskBody, now
from fleet.master.services.history import HistoryRecorder, gather_reports, worker_report
from tests.master.conftest import memory_url
from tests.master.plugins import Scraper
from tests.support.master_proc import MASTER_TOKEN, MasterProcess
from tests.support.waits import until

TYPE = "hist-api"
READ, SCOPED, OTHER = "history-read-token", "history-scoped-token", "history-other-token"
ENV = {
    "FLEET_HISTORY_INTERVAL_SECONDS": "0.2",
    "FLEET_READ_TOKENS": READ,
    "FLEET_TOKEN_SCOPES": json.dumps({SCOPED: [TYPE], OTHER: ["elsewhere"]}),
}
URL = f"/api/v1/automations/{TYPE}/history"


async def _worker_reports(b: Backend, timed_out: int, durations: list[int]) -> None:
    await b.workers.set_state(TYPE, "w1", {"state": "RUNNING", "last_seen": str(time.time())})
    hist = {"count": sum(durations), "sum": 1.0, "buckets": durations}
    await b.workers.put_stats(
        TYPE, "w1", {"tasks": {"timed_out": timed_out}, "task_duration": hist}
    )


async def _busy_points(http: httpx.AsyncClient, window: str) -> list[dict[str, Any]]:
    r = await http.get(URL, params={"window": window})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["type"] == TYPE and body["window"] == window
    return [p for p in body["points"] if p["submitted"] or p["completed"] or p["timed_out"]]


async def _recorded(master: MasterProcess) -> list[dict[str, Any]]:
    """The minute points once the master recorded everything the test did."""
    async with master.client() as http:

        async def recorded() -> list[dict[str, Any]]:
            busy = await _busy_points(http, "1h")
            sums = [sum(p[k] for p in busy) for k in ("submitted", "completed", "timed_out")]
            return busy if sums == [3, 1, 1] and any(p["p50"] is not None for p in busy) else []

        try:
            return await until(recorded, timeout=15, interval=0.1)
        except AssertionError as exc:
            raise AssertionError((exc, master.log()[-2000:])) from None


async def test_history_survives_a_restart_and_answers_only_allowed_tokens(
    shared_url: str, tmp_path: Path
) -> None:
    b = await open_backend(shared_url)
    try:
        await b.catalog.put(TYPE, catalog_entry(Scraper) | {"type": TYPE})
        await b.workers.register(TYPE, "w1", {"host": "h", "pid": 1})
        zeros = [0] * len(BUCKETS)
        await _worker_reports(b, 0, zeros)
        # The baseline is set before any master runs, so the first pass counts what follows.
        await b.history.record(TYPE, now(), Reported(0, tuple(zeros)))
        (tmp_path / "one").mkdir()
        first = MasterProcess(shared_url, tmp_path / "one", env=ENV)
        try:
            await first.wait_ready()
            reqs = [PushRequest(TaskBody(id=f"t{i}", payload={"url": "u"})) for i in range(3)]
            await b.queues.push(TYPE, reqs)
            (r,) = await b.queues.reserve(TYPE)
            assert await b.queues.ack(TYPE, [(r.body.id, r.token)]) == [True]
            await _worker_reports(b, 1, [0, 0, 0, 0, 0, 4, *zeros[6:]])
            before = await _recorded(first)
            assert first.interrupt() == 0
        finally:
            first.close()
        (tmp_path / "two").mkdir()
        second = MasterProcess(shared_url, tmp_path / "two", env=ENV)
        try:
            await second.wait_ready()
            await asyncio.sleep(0.6)  # a few passes of the new master: nothing counts twice
            assert await _recorded(second) == before
            p = next(p for p in before if p["p50"] is not None)
            assert 0.1 < p["p50"] <= 0.25 and 0.1 < p["p95"] <= 0.25
            async with second.client() as http:
                for window, n in (("24h", 96), ("30d", 720)):
                    r = await http.get(URL, params={"window": window})
                    assert len(r.json()["points"]) == n
                    assert sum(p["submitted"] for p in r.json()["points"]) == 3
            await _check_access(second)
            _check_cli(second, before)
        finally:
            second.close()
    finally:
        await b.close()


async def _check_access(master: MasterProcess) -> None:
    async with httpx.AsyncClient(base_url=master.url, timeout=10) as http:
        assert (await http.get(URL)).status_code == 401
        for token, code in ((READ, 200), (SCOPED, 200), (OTHER, 403)):
            r = await http.get(URL, headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == code, (token, r.text)
    async with master.client() as http:
        assert (await http.get(URL, params={"window": "7d"})).status_code == 422
        assert (await http.get(URL, params={"window": ""})).status_code == 422
        r = await http.get("/api/v1/automations/never-published/history")
        assert r.status_code == 404, r.text
        r = await http.get(URL)
        assert r.json()["window"] == "1h" and r.json()["step_seconds"] == 60


def _check_cli(master: MasterProcess, busy: list[dict[str, Any]]) -> None:
    def fleet(*args: str) -> Any:
        argv = ["history", TYPE, *args, "--url", master.url, "--token", MASTER_TOKEN]
        return CliRunner().invoke(main, argv, catch_exceptions=False)

    r = fleet("--json")
    assert r.exit_code == 0, r.output
    assert [p for p in json.loads(r.output)["points"] if p["submitted"]] == [
        p for p in busy if p["submitted"]
    ]
    r = fleet("--window", "30d")
    assert r.exit_code == 0 and "submitted" in r.output and "p95" in r.output, r.output
    assert fleet("--window", "7d").exit_code != 0


async def test_the_recorder_sums_every_worker_and_reads_a_bad_frame_as_zeros() -> None:
    b = await open_backend(memory_url())
    try:
        t = "hist-recorder"
        await b.catalog.put(t, catalog_entry(Scraper) | {"type": t})
        frames: dict[str, Any] = {
            "w1": {"tasks": {"timed_out": 2}, "task_duration": {"buckets": [1] * len(BUCKETS)}},
            "w2": {"tasks": {"timed_out": 3}, "task_duration": {"buckets": [2] * len(BUCKETS)}},
            "bad": {"tasks": {"timed_out": "x"}, "task_duration": {"buckets": [1, 2]}},
            "none": None,
        }
        for wid, frame in frames.items():
            await b.workers.register(t, wid, {"host": "h"})
            if frame is not None:
                await b.workers.put_stats(t, wid, frame)
        reports = await gather_reports(b)
        assert reports[t] == Reported(5, (3,) * len(BUCKETS))
        assert worker_report({"tasks": [], "task_duration": {"buckets": [-1.0] * 14}}) == Reported(
            0, (0,) * 14
        )
        recorder = HistoryRecorder(b, 3600)
        assert await recorder.tick() == 0  # the baseline
        await b.queues.push(t, [PushRequest(TaskBody(id="x", payload={"url": "u"}))])
        assert await recorder.tick() == 1 and await recorder.tick() == 0
        points = (await b.history.read(t, "1h")).points
        assert sum(p.submitted for p in points) == 1
    finally:
        await b.close()
