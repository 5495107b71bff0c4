"""``fleet task`` against a live master over real HTTP (issue 42, 6): it prints the
task's trace id, its ``--wait`` exits as ``fleet submit --wait`` does (0 only for a
task that ended done), it cancels (``--cancel``), and ``fleet tasks TYPE TASK_ID`` is
a deprecated alias that prints the same record and says so on stderr."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result

from fleet.backends import open_backend
from fleet.cli import main
from fleet.cli.records import EXIT_NOT_DONE, EXIT_STILL_RUNNING, trace_id_of, wait_status
from fleet.client.answers import TaskRecord
from fleet.core.submission import make_push_request
from tests.master.conftest import ADMIN, LiveMaster, auth, settings_for
from tests.master.plugins import SCRAPE
from tests.worker.procs import fleet_env

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
TRACEPARENT = f"00-{TRACE_ID}-b7ad6b7169203331-01"


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'fleet.db'}"


@pytest.fixture
def live(db_url: str) -> Iterator[LiveMaster]:
    master = LiveMaster(settings_for(db_url), sweeper=False)
    master.start()
    try:
        yield master
    finally:
        master.stop()


def fleet(live: LiveMaster, *args: str) -> Result:
    return CliRunner().invoke(main, [*args, "--url", live.url, "--token", ADMIN])


def submit(live: LiveMaster, **headers: str) -> str:
    r = httpx.post(
        f"{live.url}/api/v1/automations/{SCRAPE}/tasks",
        json={"payload": {"url": "http://x/"}, "max_attempts": 1},
        headers={**auth(ADMIN), **headers},
    )
    assert r.status_code == 202, r.text
    task_id: str = r.json()["task_id"]
    return task_id


def end(db_url: str, how: str) -> str:
    """A task of SCRAPE taken as a worker would, then acked (``done``) or failed on its
    only attempt (``dead``)."""

    async def run() -> str:
        b = await open_backend(db_url)
        try:
            (pushed,) = await b.queues.push(
                SCRAPE, [make_push_request({"url": "http://x/"}, max_attempts=1)]
            )
            (res,) = await b.queues.reserve(SCRAPE, visibility_seconds=30)
            if how == "done":
                assert await b.queues.ack(SCRAPE, [(res.body.id, res.token)]) == [True]
            else:
                outcome = await b.queues.nack(
                    SCRAPE, res.body.id, res.token, delay_seconds=0, error="kaput"
                )
                assert outcome == "dead"
            return pushed.task_id
        finally:
            await b.close()

    return asyncio.run(run())


# ---------------------------------------------------------------- the trace id


def test_fleet_task_prints_the_trace_id(live: LiveMaster) -> None:
    traced = submit(live, traceparent=TRACEPARENT)
    r = fleet(live, "task", SCRAPE, traced)
    assert r.exit_code == 0, r.output
    assert f"trace id  {TRACE_ID}" in r.output
    assert json.loads(fleet(live, "task", SCRAPE, traced, "--json").stdout)["trace_id"] == TRACE_ID


def test_the_trace_id_of_a_record_with_only_a_traceparent() -> None:
    record: dict[str, object] = {"task_id": "t", "state": "done", "traceparent": TRACEPARENT}
    assert trace_id_of(record) == TRACE_ID  # type: ignore[arg-type]
    assert trace_id_of(TaskRecord(task_id="t", state="done", trace_id="abc")) == "abc"
    assert trace_id_of(TaskRecord(task_id="t", state="done")) is None
    bad: dict[str, object] = {"task_id": "t", "state": "done", "traceparent": "garbage"}
    assert trace_id_of(bad) is None  # type: ignore[arg-type]


# ---------------------------------------------------------------- one exit-code rule


def test_the_wait_rule() -> None:
    assert wait_status(["done", "done"]) == 0
    assert wait_status(["done", "dead"]) == wait_status(["cancelled"]) == EXIT_NOT_DONE == 1
    assert wait_status(["unknown"]) == EXIT_NOT_DONE
    assert wait_status(["done", "processing"]) == wait_status(["queued"]) == EXIT_STILL_RUNNING
    assert wait_status(["dead", "scheduled"]) == EXIT_NOT_DONE  # an ending that is known wins


def test_task_wait_exits_0_only_for_a_done_task(live: LiveMaster, db_url: str) -> None:
    done = end(db_url, "done")
    r = fleet(live, "task", SCRAPE, done, "--wait", "5")
    assert r.exit_code == 0, r.output

    dead = end(db_url, "dead")
    r = fleet(live, "task", SCRAPE, dead, "--wait", "5")
    assert r.exit_code == EXIT_NOT_DONE, r.output
    assert "dead" in r.stdout and "kaput" in r.stdout  # the record is still shown
    r = fleet(live, "task", SCRAPE, dead, "--wait", "5", "--json")
    assert r.exit_code == EXIT_NOT_DONE and json.loads(r.stdout)["state"] == "dead"
    # Without --wait it is a question, not a wait: a dead task is an answer like any other.
    assert fleet(live, "task", SCRAPE, dead).exit_code == 0

    queued = submit(live)
    r = fleet(live, "task", SCRAPE, queued, "--wait", "0.3")
    assert r.exit_code == EXIT_STILL_RUNNING, r.output
    assert "the wait ended before the task did" in r.stderr

    r = fleet(live, "task", SCRAPE, queued, "--cancel")
    assert r.exit_code == 0 and r.stdout.strip() == f"{queued} cancelled", r.output
    r = fleet(live, "task", SCRAPE, queued, "--wait", "5")
    assert r.exit_code == EXIT_NOT_DONE and "cancelled" in r.stdout, r.output


def test_submit_wait_follows_the_same_rule(live: LiveMaster) -> None:
    r = fleet(live, "submit", SCRAPE, '{"url": "u"}', "--wait", "--wait-timeout", "0.3")
    assert r.exit_code == EXIT_STILL_RUNNING, r.output


def test_cancel_and_wait_do_not_go_together(live: LiveMaster) -> None:
    r = fleet(live, "task", SCRAPE, "any", "--cancel", "--wait", "3")
    assert r.exit_code == 2 and "--cancel and --wait do not go together" in r.output


# ---------------------------------------------------------------- one command, one record


def test_fleet_tasks_with_an_id_is_a_deprecated_alias(live: LiveMaster) -> None:
    task_id = submit(live, traceparent=TRACEPARENT)
    new = fleet(live, "task", SCRAPE, task_id, "--json")
    old = fleet(live, "tasks", SCRAPE, task_id, "--json")
    assert new.exit_code == old.exit_code == 0, old.output
    assert json.loads(old.stdout) == json.loads(new.stdout)
    assert new.stderr == ""
    assert f"deprecated: use `fleet task {SCRAPE} {task_id}`" in old.stderr

    table = fleet(live, "tasks", SCRAPE, task_id)
    assert table.stdout == fleet(live, "task", SCRAPE, task_id).stdout

    unknown = fleet(live, "tasks", SCRAPE, "no-such-task")
    assert unknown.exit_code == 1 and "no task 'no-such-task'" in unknown.stderr
    assert "deprecated" in unknown.stderr

    cancelled = fleet(live, "tasks", SCRAPE, task_id, "--cancel")
    assert cancelled.stdout.strip() == f"{task_id} cancelled", cancelled.output
    assert f"use `fleet task {SCRAPE} {task_id} --cancel`" in cancelled.stderr

    depths = fleet(live, "tasks", SCRAPE)  # the queue of a type: not deprecated
    assert depths.exit_code == 0 and "deprecated" not in depths.output


def test_the_unknown_record_is_printed_before_the_error(live: LiveMaster) -> None:
    r = fleet(live, "task", SCRAPE, "no-such-task", "--json")
    assert r.exit_code == 1
    assert json.loads(r.stdout)["state"] == "unknown"
    assert "no task 'no-such-task'" in r.stderr


def test_the_alias_in_a_real_process_keeps_stdout_clean(live: LiveMaster) -> None:
    """As a script sees it: stdout the JSON record alone, the note on stderr."""
    task_id = submit(live)
    env = fleet_env(FLEET_MASTER_URL=live.url, FLEET_ADMIN_TOKEN=ADMIN)
    r = subprocess.run(
        [sys.executable, "-m", "fleet", "tasks", SCRAPE, task_id, "--json"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["task_id"] == task_id
    assert "is deprecated: use `fleet task" in r.stderr
