"""A run that stops at its budget (issue 45, "done means"): tasks that each download
~100 KB through ``ctx.http()`` from a local site, a run with a byte budget of 1 MB, two
real ``fleet worker`` processes (two slots each) on a SQLite file and on Redis. The run
pauses after about ten tasks — the overshoot within the slots that were running — with
the rest still queued and nothing dead, and stays paused; ``fleet runs resume --budget``
(the CLI, against a real master) completes it, and its callback runs once. The CLI lines
are docs/costs.md's, as written (its budget cut to 1 MB, its callback type ours)."""

from __future__ import annotations

import asyncio
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet.backends import open_backend
from fleet.core.runs import callback_task_id
from fleet.core.submission import make_push_request
from tests.docs.blocks import fenced_blocks
from tests.support.master_proc import MASTER_TOKEN, MasterProcess
from tests.support.sites import QuietHandler, serving
from tests.support.waits import until
from tests.worker.procs import ROOT, WorkerProcess, fleet_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

BODY = b"x" * 100_000
TASKS = 30
SLOTS = 2
WORKERS = 2


class Site(QuietHandler):
    def do_GET(self) -> None:
        time.sleep(0.05)  # a page takes a moment: several tasks run at once
        self.answer(200, BODY, {"content-type": "application/octet-stream"})


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    with serving(Site) as url:
        yield url.rstrip("/")


PAGE = (ROOT / "docs" / "costs.md").read_text(encoding="utf-8")


def doc_lines() -> list[str]:
    """docs/costs.md's lines that create, show and resume a run with a budget."""
    block = next(b for b in fenced_blocks(PAGE) if "--budget" in b.text)
    lines = block.lines()
    assert lines[0].startswith("RUN=$(fleet runs create") and lines[0].endswith(")")
    create = lines[0][len("RUN=$(") : -1].replace("bytes=1e9", "bytes=1e6")
    return [create.replace("catalog-report", "cost-report"), *lines[1:]]


def fleet_cli(master: MasterProcess, *args: str) -> str:
    env = fleet_env(FLEET_MASTER_URL=master.url, FLEET_ADMIN_TOKEN=MASTER_TOKEN)
    done = subprocess.run(
        [sys.executable, "-m", "fleet", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


async def test_a_run_pauses_at_its_byte_budget_and_a_resume_completes_it(
    site: str, tmp_path: Path, shared_url: str
) -> None:
    master = MasterProcess(shared_url, tmp_path)
    plugin = "tests.costs.meter_plugin"
    workers: list[WorkerProcess] = []
    env = {"FLEET_ENTRY_POINTS": "0"}
    try:
        await master.wait_ready()
        async with await open_backend(shared_url) as b:
            await b.configs.set("cost-fetch", {"slots": SLOTS})
            for n in range(WORKERS):
                more = ["--type", "cost-report"]
                workers.append(
                    WorkerProcess(shared_url, plugin, "cost-fetch", f"w{n}", tmp_path,
                                  more_args=more, env=env)
                )  # fmt: skip
            await until(lambda: b.catalog.get("cost-report"), timeout=30, what="registered")
            create, show, resume = doc_lines()
            assert create.startswith("fleet ") and "--budget bytes=1e6" in create
            run = fleet_cli(master, *shlex.split(create)[1:]).strip()
            pushes = [make_push_request({"url": f"{site}/p/{i}"}, run=run) for i in range(TASKS)]
            assert all(r.queued for r in await b.queues.push("cost-fetch", pushes))

            async def paused_and_still() -> bool:
                rec = await b.runs.get(run)
                assert rec is not None and rec.state != "done", rec
                return rec.state == "paused" and rec.counters["running"] == 0

            await until(paused_and_still, timeout=60, interval=0.05, what="the run paused")
            rec = await b.runs.get(run)
            assert rec is not None and rec.paused_reason is not None
            assert rec.paused_reason.startswith("budget reached: bytes"), rec.paused_reason
            c = rec.counters
            # 10 downloads reach 1 MB; at most the other slots' running attempts more.
            assert 10 <= c["done"] <= 10 + WORKERS * SLOTS - 1, c
            assert c["pending"] == TASKS - c["done"] and c["dead"] == 0, c
            assert c["submitted"] == TASKS
            await asyncio.sleep(1.5)  # paused: nothing more is dispatched
            still = await b.runs.get(run)
            assert still is not None and still.state == "paused"
            assert still.counters["done"] == c["done"], still.counters
            depths = await b.queues.depths("cost-fetch")
            assert depths.dead == 0
            shown = fleet_cli(master, *shlex.split(show.replace("$RUN", run))[1:])
            assert "paused (budget reached: bytes" in shown and "budget    bytes 1e+06" in shown

            fleet_cli(master, *shlex.split(resume.replace("$RUN", run))[1:])
            watched = fleet_cli(master, "runs", "watch", run)
            assert "done" in watched
            done = await b.runs.get(run)
            assert done is not None and done.state == "done"
            assert done.counters["done"] == TASKS and done.counters["dead"] == 0

            async def reported() -> bool:
                info = await b.queues.state("cost-report", callback_task_id(run))
                return info.state == "done"

            await until(reported, timeout=30, what="the callback ran")
            await asyncio.sleep(1.0)  # a second callback would have shown by now
            reports = await b.streams.read("cost-report", n=10)
            assert [r.payload for r in reports] == [{"run_id": run, "done": TASKS}]
    finally:
        for w in workers:
            w.close()
        master.close()
