"""A newcomer's stumbles of issue 23, against a live master over real HTTP: the
catalog shows a pool by its real name, the schedules of a continuous type list
cleanly, and an unknown type or pool gets a "did you mean" (REST and CLI)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from fleet.backends import open_backend
from fleet.cli import main
from tests.master.conftest import ADMIN, auth
from tests.master.plugins import LOOP, SCRAPE

HARVEST = "m-harvest"
#: The pool's real name (its REST path) and the attribute that holds it in the class.
POOL, ATTRIBUTE = "m-jar", "cookies"


@pytest.fixture
def live(live_factory: Any, sqlite_url: str) -> Any:
    async def publish() -> None:
        backend = await open_backend(sqlite_url)
        try:
            entry = {"type": HARVEST, "kind": "batch", "config": {}, "stream": None,
                     "queue": {"name": HARVEST, "payload": {"type": "object"}},
                     "pools": {ATTRIBUTE: {"name": POOL, "payload": {}, "tags": {}}}}  # fmt: skip
            await backend.catalog.put(HARVEST, entry)
        finally:
            await backend.close()

    asyncio.run(publish())
    return live_factory(sqlite_url, sweeper=False)


def fleet(live: Any, *args: str) -> Any:
    argv = [*args, "--url", live.url, "--token", ADMIN]
    return CliRunner().invoke(main, argv, catch_exceptions=False)


def test_catalog_shows_a_pool_by_its_name(live: Any) -> None:
    env = {**os.environ, "FLEET_MASTER_URL": live.url, "FLEET_ADMIN_TOKEN": ADMIN}
    env.pop("COLUMNS", None)
    out = subprocess.run(
        [sys.executable, "-m", "fleet", "catalog"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    (line,) = [line for line in out.stdout.splitlines() if HARVEST in line]
    assert POOL in line and f" {ATTRIBUTE} " not in line
    # the name shown is the one the pool's REST path takes
    r = httpx.get(f"{live.url}/api/v1/pools/{POOL}", headers=auth(ADMIN))
    assert r.status_code == 200


def test_schedules_of_a_continuous_type_list_with_a_note(live: Any) -> None:
    r = httpx.get(f"{live.url}/api/v1/automations/{LOOP}/schedules", headers=auth(ADMIN))
    assert r.status_code == 200, r.text
    assert r.json()["schedules"] == [] and "runs without tasks" in r.json()["note"]
    out = fleet(live, "schedules", LOOP)
    assert out.exit_code == 0, out.output
    assert f"{LOOP} is a continuous automation: it runs without tasks" in out.output
    out = fleet(live, "schedules", LOOP, "--json")
    assert out.exit_code == 0 and json.loads(out.output) == []
    # a batch type without schedules says so too
    out = fleet(live, "schedules", SCRAPE)
    assert out.exit_code == 0 and f"{SCRAPE} has no schedules" in out.output
    # creating one on a continuous type is still refused
    r = httpx.post(
        f"{live.url}/api/v1/automations/{LOOP}/schedules",
        json={"id": "x", "every_seconds": 60, "payload": {}},
        headers=auth(ADMIN),
    )
    assert r.status_code == 409


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/v1/automations/m-scrap/tasks/abc"),
        ("POST", "/api/v1/automations/m-scrap/tasks"),
        ("GET", "/api/v1/automations/m-scrap/schedules"),
        ("GET", "/api/v1/automations/m-scrap/config"),
        ("DELETE", "/api/v1/automations/m-scrap"),
    ],
)
def test_an_unknown_type_gets_a_did_you_mean(live: Any, method: str, path: str) -> None:
    body = {"payload": {"url": "u"}} if method == "POST" else None
    r = httpx.request(method, f"{live.url}{path}", json=body, headers=auth(ADMIN))
    assert r.status_code == 404, r.text
    # the closest first (other types registered in this test process may follow)
    detail = r.json()["detail"]
    assert detail.startswith(f"unknown automation type 'm-scrap'; did you mean {SCRAPE!r}")


def test_did_you_mean_in_the_cli_and_none_when_nothing_is_close(live: Any) -> None:
    out = fleet(live, "tasks", "m-scrap")
    assert out.exit_code == 1
    assert f"did you mean {SCRAPE!r}" in out.output and "404" in out.output
    out = fleet(live, "schedules", "m-lop")
    assert out.exit_code == 1 and f"did you mean {LOOP!r}" in out.output
    r = httpx.get(f"{live.url}/api/v1/automations/zzzzzz/schedules", headers=auth(ADMIN))
    assert r.json()["detail"] == (
        "unknown automation type 'zzzzzz'; no worker or master has registered it yet "
        "(start one with its plugin)"
    )


def test_an_unknown_pool_gets_a_did_you_mean(live: Any) -> None:
    for method in ("GET", "DELETE"):
        r = httpx.request(method, f"{live.url}/api/v1/pools/m-jars", headers=auth(ADMIN))
        assert r.status_code == 404, r.text
        assert r.json()["detail"].endswith(f"holds no items; did you mean {POOL!r}?")
    r = httpx.get(f"{live.url}/api/v1/pools/qqqqqq", headers=auth(ADMIN))
    assert "did you mean" not in r.json()["detail"]
