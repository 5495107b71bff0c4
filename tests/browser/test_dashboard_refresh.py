"""The dashboard's one refresh primitive (issue 41, 7): every view that polls goes
through ``js/refresh.js`` (no timer of its own), stops when it is left (nothing is
requested after), never sends a second request while one is in flight, and a dead
task's page reads that task only, not a page of dead letters."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import Page, Request, expect

from tests.browser.dash_plugin import TYPE
from tests.browser.stack import Stack
from tests.browser.test_dashboard import Watch, browser, page, sign_in, stack

__all__ = ["browser", "page", "stack"]  # the fixtures this module reuses

JS = Path(__file__).resolve().parents[2] / "fleet" / "master" / "dashboard" / "static" / "js"


def test_no_view_keeps_a_timer_of_its_own() -> None:
    timers = re.compile(r"\bset(Interval|Timeout)\(")
    own = sorted(p.name for p in (JS / "views").glob("*.js") if timers.search(p.read_text()))
    assert own == [], f"views with their own refresh timers: {own}"
    assert "export class Refresher" in (JS / "refresh.js").read_text()


class Requests:
    """The API paths a page asked for, with when."""

    def __init__(self, page: Page) -> None:
        self.seen: list[tuple[float, str]] = []
        page.on("request", self._add)

    def _add(self, request: Request) -> None:
        if "/api/v1/" in request.url:
            self.seen.append((time.monotonic(), request.url.split("/api/v1", 1)[1]))

    def count(self, pattern: str, since: float = 0.0) -> int:
        return sum(1 for t, path in self.seen if t >= since and re.search(pattern, path))


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)  # the page is backend-blind
@pytest.mark.parametrize(
    ("route", "path"),
    [("#/pools", r"^/pools$"), ("#/runs", r"^/runs\?"), ("#/identities", r"^/identities$")],
)
def test_a_view_polls_while_open_and_stops_when_left(
    page: tuple[Page, Watch], stack: Stack, route: str, path: str
) -> None:
    p, watch = page
    seen = Requests(p)
    sign_in(p, stack, route)
    deadline = time.monotonic() + 15
    while seen.count(path) < 2 and time.monotonic() < deadline:
        p.wait_for_timeout(200)
    assert seen.count(path) >= 2, seen.seen  # it polls
    p.goto(f"{stack.url}/#/overview")
    expect(p.locator("#overview")).to_be_visible()
    left = time.monotonic()
    p.wait_for_timeout(6000)  # longer than either view's period
    assert seen.count(path, since=left) == 0, seen.seen
    assert not watch.errors, watch.errors


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)
def test_a_dead_tasks_page_reads_that_task_only(page: tuple[Page, Watch], stack: Stack) -> None:
    p, watch = page
    r = stack.api(
        "POST",
        f"/automations/{TYPE}/tasks",
        {"payload": {"text": "read me only", "fail": True}, "max_attempts": 1},
    )
    assert r.status_code == 202, r.text
    task_id = r.json()["task_id"]
    stack.wait_for(
        lambda: stack.api("GET", f"/automations/{TYPE}/tasks/{task_id}").json()["state"] == "dead",
        30,
        "the task dead",
    )
    seen = Requests(p)
    sign_in(p, stack, f"#/task/{TYPE}/{task_id}")
    view = p.locator(f"#task[data-task='{task_id}']")
    expect(view.locator("h2 [data-state]")).to_have_text("dead")
    expect(view.locator("[data-role=payload]")).to_contain_text("read me only")
    expect(view.locator("[data-role=error]")).to_contain_text("asked to fail")
    expect(view.locator("[data-role=error] pre")).to_contain_text("RuntimeError")
    p.wait_for_timeout(3000)  # an ended task is not polled again
    assert seen.count(r"/dead") == 0, seen.seen
    assert seen.count(rf"^/automations/{TYPE}/tasks/{task_id}") == 1, seen.seen
    assert not watch.errors, watch.errors
