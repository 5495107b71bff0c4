"""Pure helpers of the master and the client, without an event loop."""

from __future__ import annotations

import click
import httpx
import pytest

from fleet.cli.common import ago, parse_assignment
from fleet.client.http import error_for, format_validation
from fleet.core.records import WorkerRecord
from fleet.master.http.limits import limit_for_paths
from fleet.master.services.workers_view import is_up, worker_counts, worker_view


def record(
    state: dict[str, str], gen: int = 0, stats: dict[str, object] | None = None
) -> WorkerRecord:
    return WorkerRecord("t", "w", {"host": "h", "pid": 7}, None, gen, state, stats)


def test_worker_view_up_down_and_lag() -> None:
    live = record({"state": "RUNNING", "last_seen": "100", "applied_gen": "2"}, gen=3)
    view = worker_view(live, now=105, heartbeat_seconds=5)
    assert view["up"] and view["state"] == "RUNNING" and view["lagging"]
    assert view["gen"] == {"desired": 3, "applied": 2}
    assert view["host"] == "h" and view["pid"] == 7
    late = worker_view(live, now=116, heartbeat_seconds=5)
    assert not late["up"] and late["state"] == "DOWN" and not late["lagging"]
    stopped = record({"state": "STOPPED", "last_seen": "100"})
    assert not is_up(stopped, 100, 5)
    garbage = record({"last_seen": "soon", "slots": "many"}, stats={"slots": "x"})
    view = worker_view(garbage, now=1, heartbeat_seconds=5)
    assert view["up"] is False and view["slots"]["running"] == 0
    assert worker_counts([view, late, worker_view(live, 101, 5)]) == {
        "total": 3,
        "up": 1,
        "lagging": 1,
    }


def test_batch_route_gets_the_batch_limit() -> None:
    pick = limit_for_paths(10, 99)
    assert pick("/api/v1/automations/x/tasks/batch") == 99
    assert pick("/api/v1/automations/x/tasks/batch/") == 99
    assert pick("/api/v1/automations/x/tasks") == 10
    assert pick("/api/v1/identities/shop") == 99  # up to 1,000 identities with their jars
    assert pick("/api/v1/identities") == 10


def test_client_error_messages() -> None:
    detail = [{"loc": ["body", "payload", "url"], "msg": "Field required"}]
    assert format_validation(detail) == "payload.url: Field required"
    req = httpx.Request("GET", "http://m/")
    assert "(401)" in str(error_for(httpx.Response(401, json={"detail": "x"}, request=req)))
    err = error_for(httpx.Response(422, json={"detail": detail}, request=req))
    assert err.status == 422 and "payload.url: Field required" in str(err)
    err = error_for(httpx.Response(502, text="<html>bad gateway</html>", request=req))
    assert "bad gateway" in str(err) and "(502)" in str(err)


def test_parse_assignment_and_ago() -> None:
    assert parse_assignment("slots=3") == ("slots", 3)
    assert parse_assignment("enabled=false") == ("enabled", False)
    assert parse_assignment("ua=Mozilla 5") == ("ua", "Mozilla 5")
    assert parse_assignment('cfg={"a": 1}') == ("cfg", {"a": 1})
    with pytest.raises(click.BadParameter):
        parse_assignment("novalue")
    assert ago(None) == "-" and ago(5) == "5s" and ago(120) == "2m" and ago(7200) == "2.0h"
