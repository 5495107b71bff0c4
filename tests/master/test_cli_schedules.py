"""``fleet schedules`` and the client's schedule methods against a live master."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from click.testing import CliRunner

from fleet.backends import open_backend
from fleet.cli import main
from fleet.cli.schedules import every_text, when_text
from fleet.client.http import ClientError, FleetClient
from tests.master.conftest import ADMIN, READ, memory_url
from tests.master.plugins import SCRAPE


@pytest.fixture
def live(live_factory: Any) -> Any:
    return live_factory(memory_url(), sweeper=False)


def fleet(live: Any, *args: str, token: str = ADMIN, stdin: str | None = None) -> Any:
    argv = [args[0], *args[1:], "--url", live.url, "--token", token]
    return CliRunner().invoke(main, argv, input=stdin, catch_exceptions=False)


def make(live: Any, schedule_id: str, **fields: Any) -> dict[str, Any]:
    with FleetClient(live.url, ADMIN) as client:
        return client.schedule_create(SCRAPE, schedule_id, {"url": "https://e.x/"}, **fields)


def test_client_methods(live: Any) -> None:
    with FleetClient(live.url, ADMIN) as client:
        s = client.schedule_create(SCRAPE, "c", {"url": "u"}, every_seconds=300, group="g")
        assert (s["id"], s["every_seconds"], s["group"], s["enabled"]) == ("c", 300.0, "g", True)
        assert [x["id"] for x in client.schedules(SCRAPE)] == ["c"]
        assert client.schedule(SCRAPE, "c") == s
        patched = client.schedule_patch(
            SCRAPE, "c", {"cron": "0 3 * * *", "timezone": "Asia/Tokyo"}
        )
        assert (patched["cron"], patched["every_seconds"]) == ("0 3 * * *", None)
        task_id = client.schedule_run(SCRAPE, "c")
        assert client.task_state(SCRAPE, task_id)["state"] == "queued"
        assert client.schedule_delete(SCRAPE, "c") == {"deleted": True}
        with pytest.raises(ClientError) as err:
            client.schedule(SCRAPE, "c")
        assert err.value.status == 404
        with pytest.raises(ClientError) as err:
            client.schedule_create(SCRAPE, "bad", {"url": "u"}, cron="nope")
        assert err.value.status == 422 and "cron:" in str(err.value)


def test_list_show_pause_resume(live: Any) -> None:
    make(live, "hourly", cron="0 * * * *", timezone="Europe/Berlin")
    make(live, "often", every_seconds=300, priority=2)
    r = fleet(live, "schedules", SCRAPE, token=READ)
    assert r.exit_code == 0, r.output
    assert "hourly" in r.output and "0 * * * *" in r.output and "Europe/Berlin" in r.output
    assert "every 5m" in r.output and "(in " in r.output
    listed = json.loads(fleet(live, "schedules", SCRAPE, "--json").output)
    assert [s["id"] for s in listed] == ["hourly", "often"]
    r = fleet(live, "schedules", SCRAPE, "often")
    assert r.exit_code == 0 and "priority 2" in r.output and '"url": "https://e.x/"' in r.output
    s = json.loads(fleet(live, "schedules", SCRAPE, "often", "--pause", "--json").output)
    assert s["enabled"] is False
    r = fleet(live, "schedules", SCRAPE, "often")
    assert "paused" in r.output
    r = fleet(live, "schedules", SCRAPE, "often", "--resume")
    assert r.exit_code == 0 and "yes" in r.output and "(in " in r.output
    assert json.loads(fleet(live, "schedules", SCRAPE, "often", "--json").output)["enabled"]


def test_run_now_and_delete(live: Any) -> None:
    make(live, "r", every_seconds=3600)
    r = fleet(live, "schedules", SCRAPE, "r", "--run-now")
    assert r.exit_code == 0, r.output
    task_id = r.output.strip()
    assert task_id.startswith("schedule:r:run:")
    with FleetClient(live.url, ADMIN) as client:
        assert client.task_state(SCRAPE, task_id)["state"] == "queued"
    again = json.loads(fleet(live, "schedules", SCRAPE, "r", "--run-now", "--json").output)
    assert again["task_id"] != task_id
    shown = json.loads(fleet(live, "schedules", SCRAPE, "r", "--json").output)
    assert shown["last_task_id"] == again["task_id"]
    r = fleet(live, "schedules", SCRAPE, "r", "--delete", stdin="n\n")
    assert r.exit_code == 1 and "Aborted" in r.output
    r = fleet(live, "schedules", SCRAPE, "r", "--delete", stdin="y\n")
    assert r.exit_code == 0 and "schedule r deleted" in r.output
    make(live, "r", every_seconds=60)
    r = fleet(live, "schedules", SCRAPE, "r", "--delete", "--json")
    assert json.loads(r.output) == {"deleted": True}
    make(live, "r", every_seconds=60)
    assert fleet(live, "schedules", SCRAPE, "r", "--delete", "--yes").exit_code == 0
    assert json.loads(fleet(live, "schedules", SCRAPE, "--json").output) == []


def test_errors_are_clean(live: Any) -> None:
    r = fleet(live, "schedules", SCRAPE, "--pause")
    assert r.exit_code == 2 and "name the schedule ID" in r.output
    r = fleet(live, "schedules", SCRAPE, "x", "--pause", "--resume")
    assert r.exit_code == 2 and "exclude" in r.output
    r = fleet(live, "schedules", SCRAPE, "missing")
    assert r.exit_code == 1 and "404" in r.output
    make(live, "s", every_seconds=60)
    r = fleet(live, "schedules", SCRAPE, "s", "--pause", token=READ)
    assert r.exit_code == 1 and "403" in r.output
    r = fleet(live, "schedules", "no-such-type")
    assert r.exit_code == 1 and "404" in r.output


def test_an_unreadable_schedule(live_factory: Any, sqlite_url: str) -> None:
    live = live_factory(sqlite_url, sweeper=False)

    async def put_raw() -> None:
        backend = await open_backend(sqlite_url)
        try:
            await backend.schedules.put_raw(SCRAPE, "broken", '{"id": "broken"}', None)
        finally:
            await backend.close()

    asyncio.run(put_raw())
    make(live, "fine", every_seconds=60)
    r = fleet(live, "schedules", SCRAPE)
    assert r.exit_code == 0 and "unreadable" in r.output and "every 1m" in r.output
    r = fleet(live, "schedules", SCRAPE, "broken")
    assert r.exit_code == 1 and "409" in r.output and "cannot be read" in r.output
    r = fleet(live, "schedules", SCRAPE, "broken", "--delete", "--yes")
    assert r.exit_code == 0, r.output
    assert [s["id"] for s in json.loads(fleet(live, "schedules", SCRAPE, "--json").output)] == [
        "fine"
    ]


def test_time_formatting() -> None:
    assert every_text(300) == "every 5m"
    assert every_text(7200) == "every 2h"
    assert every_text(86400 * 2) == "every 2d"
    assert every_text(90) == "every 90s"
    assert every_text(1.5) == "every 1.5s"
    t = time.time()
    assert when_text(t + 300, now=t).endswith("(in 5m)")
    assert when_text(t - 30, now=t).endswith("(30s ago)")
    assert when_text(None) == "-"
