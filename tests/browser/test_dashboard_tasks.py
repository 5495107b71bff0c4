"""The dashboard's history and task browser (issue 28), on SQLite and Redis:

- the charts come from the backend's history: present the moment the page opens,
  and still there after the master restarted;
- a task is found by its id, and its page shows state, attempts, outputs and payload;
- dead letters selected in the browser are replayed in bulk;
- 10,000 pending tasks are paged through, newest first, without repeats.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.browser.stack import Stack, running_stack
from tests.browser.test_dashboard import Watch, browser, page, shot, sign_in

__all__ = ["browser", "page"]  # the fixtures this module reuses

TYPE = "dash-echo"
A = f"/automations/{TYPE}"


@pytest.fixture(scope="module", params=["sqlite", "redis"])
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """A master recording history every second, and a worker, per backend kind."""
    yield from running_stack(
        request, tmp_path_factory, "dash-tasks", {"FLEET_HISTORY_INTERVAL_SECONDS": "1"}
    )


def _batch(stack: Stack, tasks: list[dict[str, object]]) -> list[str]:
    r = stack.api("POST", f"{A}/tasks/batch", {"tasks": tasks})
    assert r.status_code == 202, r.text
    return [str(x["task_id"]) for x in r.json()["results"]]


def _state(stack: Stack, task_id: str) -> str:
    return str(stack.api("GET", f"{A}/tasks/{task_id}").json()["state"])


def _completed_in_history(stack: Stack) -> int:
    r = stack.api("GET", f"{A}/history?window=1h")
    assert r.status_code == 200, r.text
    return sum(int(p["completed"]) for p in r.json()["points"])


def test_history_charts_survive_a_master_restart(
    page: tuple[Page, Watch], stack: Stack, tmp_path: Path
) -> None:
    p, watch = page
    tag = uuid.uuid4().hex[:6]
    ids = _batch(stack, [{"payload": {"text": f"{tag} {i}"}} for i in range(20)])
    stack.wait_for(lambda: all(_state(stack, i) == "done" for i in ids), 30, "20 tasks done")
    stack.wait_for(lambda: _completed_in_history(stack) >= 20, 30, "the history to record them")
    before = _completed_in_history(stack)
    stack.restart_master()
    assert _completed_in_history(stack) >= before  # kept in the backend, not the master
    sign_in(p, stack)
    card = p.locator(f"#overview .type-card[data-type='{TYPE}']")
    charts = card.locator("[data-role=history][data-window='1h']")
    expect(charts.locator("[data-chart]")).to_have_count(3)
    expect(charts.locator("[data-role=completed]")).to_have_text(re.compile(r"^\d+$"))
    assert int(charts.locator("[data-role=completed]").inner_text()) >= before
    card.locator("svg.spark").first.wait_for()
    p.click(".window-picker [data-window='24h']")
    expect(
        card.locator("[data-role=history][data-window='24h'] [data-role=completed]")
    ).to_have_text(re.compile(r"^\d+$"))
    assert int(card.locator("[data-role=history] [data-role=completed]").inner_text()) >= before
    shot(p, "history", tmp_path)
    assert not watch.errors, watch.errors


def test_find_a_task_by_id_and_open_its_page(page: tuple[Page, Watch], stack: Stack) -> None:
    p, watch = page
    text = f"find me {uuid.uuid4().hex[:6]}"
    (task_id,) = _batch(stack, [{"payload": {"text": text}}])
    stack.wait_for(lambda: _state(stack, task_id) == "done", 30, "the task done")
    sign_in(p, stack, f"#/automation/{TYPE}")
    p.fill("#tasks input[name=task-id]", task_id)
    p.click("#tasks form[role=search] button[type=submit]")
    view = p.locator(f"#task[data-task='{task_id}']")
    expect(view.locator("h2 [data-state]")).to_have_text("done")
    expect(view.locator("[data-field=attempts]")).to_contain_text("1 /")
    expect(view.locator("table.outputs")).to_contain_text(text)  # the echo it emitted
    expect(view.locator("[data-role=payload]")).to_contain_text("Not kept")  # finished
    p.goto(f"{stack.url}/#/task/{TYPE}/no-such-task")
    expect(p.locator("#task [data-role=task-detail]")).to_contain_text("No task no-such-task")
    assert not watch.errors, watch.errors


def test_a_task_page_pages_its_outputs(page: tuple[Page, Watch], stack: Stack) -> None:
    """A task that emitted 46 outputs, one of them over the record's byte cap: its
    page draws the newest 20, then 20 more, then the rest; the big one is a marker."""
    p, watch = page
    text = f"many {uuid.uuid4().hex[:6]}"
    (task_id,) = _batch(stack, [{"payload": {"text": text, "extra": 44, "pad": 9000}}])
    stack.wait_for(lambda: _state(stack, task_id) == "done", 30, "the task done")
    record = stack.api("GET", f"{A}/tasks/{task_id}").json()
    assert record["outputs_total"] == 46 and record["outputs_truncated"] is True
    assert record["outputs"][0]["truncated"] is True and record["outputs"][0]["bytes"] > 9000
    sign_in(p, stack, f"#/task/{TYPE}/{task_id}")
    view = p.locator(f"#task[data-task='{task_id}']")
    rows = view.locator("table.outputs tbody tr")
    expect(rows).to_have_count(20)
    expect(rows.first).to_contain_text("extra 43")  # newest first
    view.locator("[data-action=more-outputs]").click()
    expect(rows).to_have_count(40)
    view.locator("[data-action=more-outputs]").click()
    expect(rows).to_have_count(46)
    expect(view.locator("[data-action=more-outputs]")).to_have_count(0)
    expect(view.locator("[data-role=output-truncated]")).to_contain_text("bytes")
    expect(rows.last).not_to_contain_text("ppppp")
    assert not watch.errors, watch.errors


def test_bulk_replay_of_selected_dead_tasks(page: tuple[Page, Watch], stack: Stack) -> None:
    p, watch = page
    tag = uuid.uuid4().hex[:6]
    tasks = [
        {"payload": {"text": f"{tag} {i}", "fail_first": True}, "max_attempts": 1} for i in range(3)
    ]
    ids = _batch(stack, tasks)
    stack.wait_for(lambda: all(_state(stack, i) == "dead" for i in ids), 30, "3 tasks dead")
    sign_in(p, stack, f"#/automation/{TYPE}")
    p.click("#tasks [data-state=dead]")
    for task_id in ids[:2]:
        p.locator(f"#tasks tr[data-task='{task_id}'] input[name=task-pick]").check()
    p.click("#tasks [data-action=replay-picked]")
    expect(p.locator("#tasks .note-ok")).to_contain_text("2 replayed")
    stack.wait_for(
        lambda: [_state(stack, i) for i in ids] == ["done", "done", "dead"],
        30,
        "the two replayed tasks done, the third still dead",
    )
    # The dead task's page shows its error, traceback and payload.
    p.goto(f"{stack.url}/#/task/{TYPE}/{ids[2]}")
    view = p.locator(f"#task[data-task='{ids[2]}']")
    expect(view.locator("h2 [data-state]")).to_have_text("dead")
    expect(view.locator("[data-role=error]")).to_be_visible()
    expect(view.locator("[data-role=payload]")).to_contain_text(f"{tag} 2")
    assert not watch.errors, watch.errors


def test_paging_through_10000_pending_tasks(
    page: tuple[Page, Watch], stack: Stack, tmp_path: Path
) -> None:
    p, watch = page
    r = stack.api("POST", f"{A}/workers/{stack.worker_id}/drain")
    assert r.status_code == 200, r.text
    try:
        stack.wait_for(
            lambda: (
                "drain"
                in str(stack.api("GET", f"{A}/workers/{stack.worker_id}").json()["state"]).lower()
            ),
            30,
            "the worker to drain",
        )
        tag = uuid.uuid4().hex[:6]
        ids: list[str] = []
        for start in range(0, 10_000, 2_500):
            tasks = [{"payload": {"text": f"{tag} {i}"}} for i in range(start, start + 2_500)]
            ids += _batch(stack, tasks)
        idset, last_batch = set(ids), set(ids[7_500:])
        # The whole walk through the API: every one of the 10,000 once, newest first.
        walked: list[str] = []
        cursor = None
        while True:
            q = f"{A}/tasks?state=pending&limit=500" + (f"&cursor={cursor}" if cursor else "")
            r = stack.api("GET", q)
            assert r.status_code == 200, r.text
            walked += [t["id"] for t in r.json()["items"] if t["id"] in idset]
            cursor = r.json()["next_cursor"]
            if cursor is None:
                break
        assert len(walked) == 10_000 and set(walked) == idset
        assert set(walked[:2_500]) == last_batch, "newest first"
        sign_in(p, stack, f"#/automation/{TYPE}")
        rows = p.locator("#tasks table.tasks tbody tr")
        seen: list[str] = []
        for n in range(4):
            expect(rows).to_have_count(50)
            if seen:
                expect(rows.first).not_to_have_attribute("data-task", seen[-50])
            seen += [rows.nth(i).get_attribute("data-task") or "" for i in range(50)]
            if n < 3:
                p.click("#tasks [data-action=older]")
        assert seen == walked[:200], "four pages of the walk, in order, none repeated"
        shot(p, "tasks", tmp_path)
        p.click("#tasks [data-action=newer]")
        expect(rows.first).to_have_attribute("data-task", walked[100])
        # A pending task deep in the queue: its page shows its payload.
        deep = walked[6_000]
        p.goto(f"{stack.url}/#/task/{TYPE}/{deep}")
        view = p.locator(f"#task[data-task='{deep}']")
        expect(view.locator("h2 [data-state]")).to_have_text("queued")
        text = f"{tag} {ids.index(deep)}"
        expect(view.locator("[data-role=payload]")).to_contain_text(f'"{text}"')
    finally:
        stack.api("POST", f"{A}/workers/{stack.worker_id}/resume")
    assert not watch.errors, watch.errors
