"""``fleet groups`` and ``fleet submit --group`` against a live master (real HTTP)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from fleet.cli import main
from tests.master.conftest import ADMIN, READ, memory_url
from tests.master.plugins import SCRAPE


@pytest.fixture
def live(live_factory: Any) -> Any:
    return live_factory(memory_url(), sweeper=False)


def fleet(live: Any, *args: str, token: str = ADMIN) -> Any:
    argv = [args[0], *args[1:], "--url", live.url, "--token", token]
    return CliRunner().invoke(main, argv, catch_exceptions=False)


def test_submit_with_group_then_list_pause_rate_reset(live: Any) -> None:
    for i in range(3):
        r = fleet(live, "submit", SCRAPE, json.dumps({"url": f"u{i}"}), "--group", "a.example")
        assert r.exit_code == 0, r.output
    r = fleet(live, "submit", SCRAPE, '{"url": "b"}', "--group", "b.example")
    assert r.exit_code == 0
    r = fleet(live, "groups", SCRAPE, token=READ)
    assert r.exit_code == 0, r.output
    assert "a.example" in r.output and "b.example" in r.output
    listed = json.loads(fleet(live, "groups", SCRAPE, "--json").output)
    assert [(g["group"], g["pending"]) for g in listed["groups"]] == [
        ("a.example", 3),
        ("b.example", 1),
    ]
    r = fleet(live, "groups", SCRAPE, "a.example", "--pause", "--rate", "2/s", "--json")
    assert r.exit_code == 0, r.output
    g = json.loads(r.output)
    assert (g["paused"], g["rate"], g["concurrency"]) == (True, "2/s", None)
    # --concurrency keeps the rate and the pause already set
    g = json.loads(
        fleet(live, "groups", SCRAPE, "a.example", "--concurrency", "4", "--json").output
    )
    assert (g["paused"], g["rate"], g["concurrency"]) == (True, "2/s", 4)
    g = json.loads(fleet(live, "groups", SCRAPE, "a.example", "--resume", "--json").output)
    assert (g["paused"], g["rate"], g["concurrency"]) == (False, "2/s", 4)
    r = fleet(live, "groups", SCRAPE, "a.example")
    assert "2/s *" in r.output and "4 *" in r.output
    g = json.loads(fleet(live, "groups", SCRAPE, "a.example", "--reset", "--json").output)
    assert g["settings"] is None and g["rate"] is None


def test_groups_errors_are_clean(live: Any) -> None:
    r = fleet(live, "groups", SCRAPE, "--pause")
    assert r.exit_code == 2 and "name the GROUP" in r.output
    r = fleet(live, "groups", SCRAPE, "g", "--pause", "--resume")
    assert r.exit_code == 2
    r = fleet(live, "groups", SCRAPE, "g", "--rate", "lots")
    assert r.exit_code == 1 and "rate" in r.output
    r = fleet(live, "groups", SCRAPE, "g", "--pause", token=READ)
    assert r.exit_code == 1
    r = fleet(live, "groups", "no-such-type")
    assert r.exit_code == 1 and "404" in r.output
