"""``fleet runs`` (list, show, watch, create, cancel) and ``fleet submit --run
--unique-key`` against a live master (real HTTP)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest
from click.testing import CliRunner

from fleet.backends import open_backend
from fleet.cli import main
from tests.master.conftest import ADMIN, READ
from tests.master.plugins import SCRAPE


@pytest.fixture
def live(live_factory: Any, sqlite_url: str) -> Any:
    # SQLite: the test finishes tasks from another thread through its own backend.
    master = live_factory(sqlite_url, sweeper=False)
    master.backend_url = sqlite_url
    return master


def fleet(live: Any, *args: str, token: str = ADMIN) -> Any:
    argv = [*args, "--url", live.url, "--token", token]
    return CliRunner().invoke(main, argv, catch_exceptions=False)


def test_create_submit_list_show_watch(live: Any) -> None:
    r = fleet(live, "runs", "create", "--name", "site", "--on-complete-type", SCRAPE,
              "--on-complete-payload", '{"url": "report"}')  # fmt: skip
    assert r.exit_code == 0, r.output
    run = r.output.strip()
    for key in ("a", "b", "a"):
        r = fleet(live, "submit", SCRAPE, json.dumps({"url": key}), "--run", run,
                  "--unique-key", key)  # fmt: skip
        assert r.exit_code == 0, r.output
    assert "duplicate" in r.output
    listed = json.loads(fleet(live, "runs", "--json", token=READ).output)
    assert [x["run_id"] for x in listed["runs"]] == [run]
    r = fleet(live, "runs")
    assert run in r.output and "site" in r.output
    shown = fleet(live, "runs", "show", run)
    assert "running" in shown.output and "duplicates" in shown.output

    # No worker here: a thread finishes the tasks through the backend itself.
    def drain() -> None:
        async def go() -> None:
            async with await open_backend(live.backend_url) as b:
                while got := await b.queues.reserve(SCRAPE, k=10):
                    await b.queues.ack(SCRAPE, [(x.body.id, x.token) for x in got])

        time.sleep(0.5)
        asyncio.run(go())

    threading.Thread(target=drain, daemon=True).start()
    r = fleet(live, "runs", "watch", run, "--interval", "0.1")
    assert r.exit_code == 0, r.output
    assert "done" in r.output
    record = json.loads(fleet(live, "runs", "show", run, "--json").output)
    assert record["state"] == "done"
    assert record["counters"]["done"] == 2 and record["counters"]["duplicates"] == 1


def test_cancel_and_errors(live: Any) -> None:
    run = fleet(live, "runs", "create").output.strip()
    fleet(live, "submit", SCRAPE, '{"url": "x"}', "--run", run)
    r = fleet(live, "runs", "cancel", run, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["state"] == "cancelled"
    r = fleet(live, "runs", "watch", run)
    assert r.exit_code == 1  # it ended cancelled
    r = fleet(live, "submit", SCRAPE, '{"url": "y"}', "--run", run)
    assert r.exit_code == 1 and "ended" in r.output
    r = fleet(live, "runs", "show", "nope")
    assert r.exit_code == 1 and "nope" in r.output
    r = fleet(live, "runs", "create", "--on-complete-payload", "{}")
    assert r.exit_code == 2
    r = fleet(live, "runs", "create", token=READ)
    assert r.exit_code == 1


def test_create_names_the_types_and_the_max_delay(live: Any) -> None:
    r = fleet(live, "runs", "create", "--type", SCRAPE, "--type", "other", "--max-delay", "60")
    assert r.exit_code == 0, r.output
    shown = json.loads(fleet(live, "runs", "show", r.output.strip(), "--json").output)
    assert shown["types"] == sorted(["other", SCRAPE]) and shown["max_delay_seconds"] == 60
