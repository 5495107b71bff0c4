"""``fleet tasks TYPE --state S [--run R]``: a page of a type's tasks by state against a
live master (issue 42, item 2): done tasks newest finished first, a run's only, the
command for the next page, and the usage errors."""

from __future__ import annotations

import asyncio
import json

from fleet.backends import open_backend
from fleet.core.records import PushRequest, TaskBody, now
from tests.cli.test_task_command import db_url, fleet, live  # noqa: F401  (fixtures)
from tests.master.conftest import LiveMaster
from tests.master.plugins import SCRAPE


def finish(url: str, n: int, run: bool) -> tuple[str | None, list[str]]:
    """``n`` tasks of SCRAPE pushed (into a new run if ``run``) and acked one by one;
    the run and the ids in finish order."""

    async def go() -> tuple[str | None, list[str]]:
        b = await open_backend(url)
        try:
            run_id = await b.runs.create(name="cli") if run else None
            ids = [f"{'r' if run else 'x'}{i}" for i in range(n)]
            bodies = [
                TaskBody(id=i, payload={"url": "u"}, enqueued_at=now(), run=run_id) for i in ids
            ]
            await b.queues.push(SCRAPE, [PushRequest(body) for body in bodies])
            done = []
            for _ in ids:
                (res,) = await b.queues.reserve(SCRAPE, visibility_seconds=30)
                assert await b.queues.ack(SCRAPE, [(res.body.id, res.token)]) == [True]
                done.append(res.body.id)
            return run_id, done
        finally:
            await b.close()

    return asyncio.run(go())


def test_done_tasks_paged_and_by_run(live: LiveMaster, db_url: str) -> None:  # noqa: F811
    _, loose = finish(db_url, 3, run=False)
    run_id, in_run = finish(db_url, 2, run=True)
    out = fleet(live, "tasks", SCRAPE, "--state", "done", "--json")
    assert out.exit_code == 0, out.output
    page = json.loads(out.output)
    assert [t["id"] for t in page["items"]] == (loose + in_run)[::-1]
    assert all(t["state"] == "done" and t["finished_at"] for t in page["items"])
    assert run_id is not None
    out = fleet(live, "tasks", SCRAPE, "--state", "done", "--run", run_id, "--json")
    assert sorted(t["id"] for t in json.loads(out.output)["items"]) == sorted(in_run)
    # a table, and the command for the next page
    out = fleet(live, "tasks", SCRAPE, "--state", "done", "--limit", "2")
    assert out.exit_code == 0, out.output
    assert in_run[-1] in out.output and "finished" in out.output
    (more,) = [line for line in out.output.splitlines() if line.startswith("more: ")]
    after = more.split("--after ")[1]
    out = fleet(
        live, "tasks", SCRAPE, "--state", "done", "--limit", "2", "--after", after, "--json"
    )
    assert [t["id"] for t in json.loads(out.output)["items"]] == loose[::-1][:2]


def test_bad_options_are_usage_errors(live: LiveMaster) -> None:  # noqa: F811
    assert fleet(live, "tasks", SCRAPE, "--run", "x").exit_code == 2
    assert fleet(live, "tasks", SCRAPE, "--state", "finished").exit_code == 2
    assert fleet(live, "tasks", SCRAPE, "some-id", "--state", "done").exit_code == 2
    out = fleet(live, "tasks", SCRAPE, "--state", "pending")
    assert out.exit_code == 0 and "no pending task." in out.output


def test_fleet_task_shows_each_attempt(live: LiveMaster, db_url: str) -> None:  # noqa: F811
    async def go() -> None:
        b = await open_backend(db_url)
        try:
            body = TaskBody(id="tries", payload={"url": "u"}, enqueued_at=now(), max_attempts=3)
            await b.queues.push(SCRAPE, [PushRequest(body)])
            (res,) = await b.queues.reserve(SCRAPE, visibility_seconds=30)
            await b.queues.mark_started(SCRAPE, [("tries", res.token)], worker_id="box-1")
            await b.queues.nack(SCRAPE, "tries", res.token, delay_seconds=0, error="E: first")
            (res,) = await b.queues.reserve(SCRAPE, visibility_seconds=30)
            await b.queues.mark_started(SCRAPE, [("tries", res.token)], worker_id="box-2")
            assert await b.queues.ack(SCRAPE, [("tries", res.token)], worker_id="box-2") == [True]
        finally:
            await b.close()

    asyncio.run(go())
    out = fleet(live, "task", SCRAPE, "tries", "--json")
    rows = [(a["attempt"], a["worker"], a["outcome"]) for a in json.loads(out.output)["attempts"]]
    assert rows == [(1, "box-1", "failed"), (2, "box-2", "done")]
    out = fleet(live, "task", SCRAPE, "tries")
    assert out.exit_code == 0, out.output
    table = out.output[out.output.index("attempts") :]
    assert "box-1" in table and "failed" in table and "E: first" in table
    assert "box-2" in table and "done" in table
