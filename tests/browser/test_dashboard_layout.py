"""The automation and workers pages read as an operator reads them (issue 42): a
type's tasks and output first and its config last, its dead tasks listed once (and
replayed from there); workers grouped by process, "Forget" offered only for a
process that is down. On SQLite: the layout is backend-blind."""

from __future__ import annotations

import re
import socket
import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.browser.stack import Stack, running_stack
from tests.browser.test_dashboard import Watch, browser, page, sign_in

__all__ = ["browser", "page"]  # the fixtures this module reuses

TYPE = "dash-echo"
A = f"/automations/{TYPE}"


@pytest.fixture(scope="module", params=["sqlite"])
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    yield from running_stack(request, tmp_path_factory, "dash-layout")


def _state(stack: Stack, task_id: str) -> str:
    return str(stack.api("GET", f"{A}/tasks/{task_id}").json()["state"])


def test_the_automation_page_shows_tasks_first_config_last_and_dead_tasks_once(
    page: tuple[Page, Watch], stack: Stack
) -> None:
    p, watch = page
    body = {"payload": {"text": f"dies {uuid.uuid4().hex[:6]}", "fail_first": True}}
    r = stack.api("POST", f"{A}/tasks", {**body, "max_attempts": 1})
    assert r.status_code == 202, r.text
    task_id = str(r.json()["task_id"])
    stack.wait_for(lambda: _state(stack, task_id) == "dead", 30, "the task dead")

    sign_in(p, stack, f"#/automation/{TYPE}")
    expect(p.locator("#config-editor #cfg-slots")).to_be_visible()
    panels = p.eval_on_selector_all("#automation section[id]", "els => els.map((e) => e.id)")
    assert "dlq" not in panels
    assert panels.index("tasks") < panels.index("tail") < panels.index("submit"), panels
    assert panels[-1] == "config-editor", panels  # the config editor comes last
    # The task browser opens in the first screenful; the config editor below the workers.
    tasks, config = p.locator("#tasks").bounding_box(), p.locator("#config-editor").bounding_box()
    workers = p.locator("#automation section", has=p.locator("h3", has_text="Workers"))
    below = workers.bounding_box()
    assert tasks and config and below
    assert tasks["y"] < 900 < config["y"] and config["y"] > below["y"]

    # The dead task: counted on its tab, listed once on the whole page.
    expect(p.locator("#tasks [data-count=dead]")).to_have_text(re.compile(r"^\s*1$"))
    p.click("#tasks [data-state=dead]")
    expect(p.locator(f"#tasks tr[data-task='{task_id}']")).to_contain_text("first attempt fails")
    expect(p.locator(f"tr[data-task='{task_id}']")).to_have_count(1)
    # Replayed from there (its second attempt succeeds).
    p.click("#tasks [data-action=replay-all]")
    expect(p.locator("#tasks .note-ok")).to_contain_text("Replay all")
    expect(p.locator("#tasks .empty")).to_have_text("No dead task.")
    stack.wait_for(lambda: _state(stack, task_id) == "done", 30, "the replayed task done")
    assert not watch.errors, watch.errors


def test_workers_are_grouped_by_process_and_only_a_down_one_is_forgotten(
    page: tuple[Page, Watch], stack: Stack
) -> None:
    p, watch = page
    pair = f"dash-pair-{uuid.uuid4().hex[:6]}"
    proc = stack.spawn_worker(pair, ["tests.browser.dash_plugin_pair"])
    sign_in(p, stack, "#/workers")
    group = p.locator(f"#workers tbody[data-process='{pair}']")
    mine = p.locator(f"#workers tbody[data-process='{stack.worker_id}']")
    try:
        # One process running two types: one group, a row per type, one host and pid.
        expect(group.locator("[data-role=process-up]")).to_contain_text("2 of 2 types up")
        rows = group.locator("tr[data-worker]")
        expect(rows).to_have_count(2)
        assert sorted(rows.nth(i).get_attribute("data-type") or "" for i in range(2)) == [
            TYPE,
            "dash-pair",
        ]
        expect(group.locator("[data-role=host]")).to_have_text(socket.gethostname())
        expect(group.locator("[data-role=pid]")).to_have_text(f"pid {proc.pid}")
        expect(p.locator("#workers [data-role=workers-count]")).to_contain_text(
            "2 worker processes on 1 host, 3 type registrations"
        )
        # Live workers: drained or resumed, never forgotten.
        expect(rows.get_by_role("button", name="Drain")).to_have_count(2)
        expect(p.locator("#workers").get_by_role("button", name="Forget")).to_have_count(0)
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        stack.procs.remove(proc)  # stopped on purpose: not a process that died on us
    # Down: the group offers Forget (once, for both types); the live worker still not.
    expect(group.locator("[data-role=process-up]")).to_contain_text("0 of 2 types up")
    expect(group.get_by_role("button", name="Forget")).to_have_count(1)
    expect(group.get_by_role("button", name="Drain")).to_have_count(0)
    expect(mine.get_by_role("button", name="Forget")).to_have_count(0)
    # A type's page lists its rows alone: the same rule, row by row.
    p.goto(f"{stack.url}/#/automation/{TYPE}")
    down = p.locator(f"#automation tr[data-worker='{pair}']")
    live = p.locator(f"#automation tr[data-worker='{stack.worker_id}']")
    expect(down.get_by_role("button", name="Forget")).to_have_count(1)
    expect(live.get_by_role("button", name="Drain")).to_be_visible()
    expect(live.get_by_role("button", name="Forget")).to_have_count(0)
    p.goto(f"{stack.url}/#/workers")
    group.get_by_role("button", name="Forget").click()
    assert any(pair in d for d in watch.dialogs), watch.dialogs
    expect(group).to_have_count(0)
    expect(mine).to_be_visible()
    left = [w for w in stack.api("GET", "/workers").json() if w["worker_id"] == pair]
    assert left == [], left
    assert not watch.errors, watch.errors
