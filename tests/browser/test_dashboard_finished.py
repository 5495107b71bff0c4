"""Finished tasks in the dashboard (issue 42), on SQLite and Redis:

- the task browser's done tab lists finished tasks, newest finished first;
- a run's page links to its tasks by type and state (the task browser filtered by the
  run, the filter shown and clearable) and to its callback task;
- a task's page shows its attempts (a retry, then done; a dead task's two failures);
- an output entry links to the task and the attempt that emitted it.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.browser.stack import Stack, running_stack
from tests.browser.test_dashboard import Watch, browser, page, sign_in

__all__ = ["browser", "page"]  # the fixtures this module reuses

TYPE = "dash-echo"
A = f"/automations/{TYPE}"


@pytest.fixture(scope="module", params=["sqlite", "redis"])
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """A master and a worker whose retries come after a tenth of a second."""
    yield from running_stack(
        request, tmp_path_factory, "dash-finished", {"FLEET_RETRY_BASE_SECONDS": "0.1"}
    )


def _batch(stack: Stack, tasks: list[dict[str, object]]) -> list[str]:
    r = stack.api("POST", f"{A}/tasks/batch", {"tasks": tasks})
    assert r.status_code == 202, r.text
    return [str(x["task_id"]) for x in r.json()["results"]]


def _record(stack: Stack, task_id: str, type_: str = TYPE) -> dict[str, object]:
    r = stack.api("GET", f"/automations/{type_}/tasks/{task_id}")
    assert r.status_code == 200, r.text
    return dict(r.json())


def _ended(stack: Stack, ids: list[str]) -> list[str]:
    """The states of ``ids`` once every one has ended (waits for that)."""
    stack.wait_for(
        lambda: all(_record(stack, i)["state"] in ("done", "dead") for i in ids),
        30,
        f"{len(ids)} task(s) to end",
    )
    return [str(_record(stack, i)["state"]) for i in ids]


def test_the_done_tab_lists_finished_tasks_newest_first(
    page: tuple[Page, Watch], stack: Stack
) -> None:
    p, watch = page
    tag = uuid.uuid4().hex[:6]
    (first,) = _batch(stack, [{"payload": {"text": f"{tag} first"}}])
    assert _ended(stack, [first]) == ["done"]
    (second,) = _batch(stack, [{"payload": {"text": f"{tag} second"}}])
    assert _ended(stack, [second]) == ["done"]
    sign_in(p, stack, f"#/automation/{TYPE}")
    p.click("#tasks [data-state=done]")
    expect(p.locator("#tasks")).to_have_attribute("data-state", "done")
    assert "state=done" in p.url  # the location names the tab: a reload opens it again
    rows = p.locator("#tasks table.tasks[data-state=done] tbody tr")
    expect(rows.first).to_have_attribute("data-task", second)  # newest finished first
    expect(rows.nth(1)).to_have_attribute("data-task", first)
    expect(p.locator("#tasks table.tasks thead")).to_contain_text("finished")
    expect(p.locator("#tasks table.tasks thead")).not_to_contain_text("submitted")
    row = p.locator(f"#tasks tr[data-task='{second}']")
    expect(row.locator("[data-col=when]")).to_contain_text("ago")
    expect(row.locator("[data-col=attempt]")).to_have_text("1")
    # Its id opens its page, done.
    row.locator(f"a[href*='{second}']").click()
    expect(p.locator(f"#task[data-task='{second}'] h2 [data-state]")).to_have_text("done")
    # The address with the state opens the done tab directly.
    p.goto(f"{stack.url}/#/automation/{TYPE}?state=done")
    expect(p.locator("#tasks [data-state=done][aria-pressed=true]")).to_have_count(1)
    expect(p.locator(f"#tasks tr[data-task='{first}']")).to_be_visible()
    assert not watch.errors, watch.errors


def test_a_run_page_links_to_its_tasks_by_state_and_to_its_callback(
    page: tuple[Page, Watch], stack: Stack
) -> None:
    p, watch = page
    tag = uuid.uuid4().hex[:6]
    on_complete = {"type": TYPE, "payload": {"text": f"{tag} callback"}}
    r = stack.api("POST", "/runs", {"name": f"run {tag}", "on_complete": on_complete})
    assert r.status_code == 201, r.text
    run = str(r.json()["run_id"])
    outside = _batch(stack, [{"payload": {"text": f"{tag} outside {i}"}} for i in range(2)])
    inside = _batch(
        stack,
        [
            {"payload": {"text": f"{tag} in 0"}, "run": run},
            {"payload": {"text": f"{tag} in 1"}, "run": run},
            {"payload": {"text": f"{tag} in dead", "fail": True}, "run": run, "max_attempts": 1},
        ],
    )
    assert _ended(stack, outside + inside) == ["done", "done", "done", "done", "dead"]
    stack.wait_for(lambda: stack.api("GET", f"/runs/{run}").json()["state"] == "done", 30, "run")

    sign_in(p, stack, f"#/run/{run}")
    per_type = p.locator(f"#run tr[data-type='{TYPE}']")
    done_link = per_type.locator("[data-col=done] a[data-browse=done]")
    expect(done_link).to_have_text("2")
    done_link.click()
    expect(p.locator("#tasks")).to_have_attribute("data-state", "done")
    expect(p.locator("#tasks [data-role=run-filter]")).to_contain_text(run)
    rows = p.locator("#tasks table.tasks tbody tr")
    expect(rows).to_have_count(2)  # the run's two, not the two outside it nor the callback
    assert sorted(rows.nth(i).get_attribute("data-task") or "" for i in range(2)) == sorted(
        inside[:2]
    )

    # The same tab without the filter lists the tasks outside the run too.
    p.click("#tasks [data-action=clear-run]")
    expect(p.locator("#tasks [data-role=run-filter]")).to_be_hidden()
    expect(p.locator(f"#tasks tr[data-task='{outside[0]}']")).to_be_visible()
    assert "run=" not in p.url
    # And a run id typed in filters it again.
    p.fill("#tasks input[name=run-id]", run)
    p.click("#tasks [data-role=run-pick] button[type=submit]")
    expect(p.locator("#tasks [data-role=filter-run]")).to_have_text(run)
    expect(rows).to_have_count(2)
    assert f"run={run}" in p.url

    p.go_back()  # the run's page again (the tab's addresses replace each other)
    dead_link = p.locator(f"#run tr[data-type='{TYPE}'] [data-col=dead] a[data-browse=dead]")
    expect(dead_link).to_have_text("1")
    dead_link.click()
    expect(p.locator("#tasks")).to_have_attribute("data-state", "dead")
    expect(p.locator("#tasks table.tasks tbody tr")).to_have_count(1)
    expect(p.locator("#tasks table.tasks tbody tr")).to_have_attribute("data-task", inside[2])

    # The callback task, pushed when the run ended, is a link to its page.
    p.go_back()
    callback = p.locator("#run [data-role=callback-task]")
    expect(callback).to_have_text(f"run-{run}-complete")
    callback.click()
    view = p.locator(f"#task[data-task='run-{run}-complete']")
    expect(view.locator("h2 [data-state]")).to_have_text("done")
    expect(view.locator("table.outputs")).to_contain_text(f"{tag} callback")
    assert not watch.errors, watch.errors


def test_a_task_page_shows_its_attempts(page: tuple[Page, Watch], stack: Stack) -> None:
    p, watch = page
    tag = uuid.uuid4().hex[:6]
    retried, dead = _batch(
        stack,
        [
            {"payload": {"text": f"{tag} retried", "fail_first": True}, "max_attempts": 3},
            {"payload": {"text": f"{tag} dead", "fail": True}, "max_attempts": 2},
        ],
    )
    assert _ended(stack, [retried, dead]) == ["done", "dead"]

    sign_in(p, stack, f"#/task/{TYPE}/{retried}")
    view = p.locator(f"#task[data-task='{retried}']")
    expect(view.locator("h2 [data-state]")).to_have_text("done")
    rows = view.locator("table.attempts tbody tr")
    expect(rows).to_have_count(2)
    first, second = rows.nth(0), rows.nth(1)
    expect(first).to_have_attribute("data-attempt", "1")
    expect(first.locator("[data-col=outcome]")).to_have_text("failed")
    expect(first.locator("[data-col=error]")).to_contain_text("first attempt fails")
    expect(second).to_have_attribute("data-attempt", "2")
    expect(second.locator("[data-col=outcome]")).to_have_text("done")
    expect(second.locator("[data-col=error]")).to_have_text("")
    for row in (first, second):
        expect(row).to_contain_text(stack.worker_id)
        for col in ("started", "ended", "duration"):
            expect(row.locator(f"[data-col={col}]")).not_to_have_text("—")
    expect(view.locator("[data-field=started]")).not_to_have_text("—")

    # A dead task: both failures, and its start shown.
    p.goto(f"{stack.url}/#/task/{TYPE}/{dead}")
    view = p.locator(f"#task[data-task='{dead}']")
    expect(view.locator("h2 [data-state]")).to_have_text("dead")
    outcomes = view.locator("table.attempts tbody [data-col=outcome]")
    expect(outcomes).to_have_text(["failed", "dead"])
    expect(view.locator("table.attempts tbody [data-col=error]").last).to_contain_text(
        f"asked to fail: {tag} dead"
    )
    expect(view.locator("[data-field=started]")).to_have_text(re.compile(r"\d"))
    assert not watch.errors, watch.errors


def test_an_output_entry_links_to_its_task_and_attempt(
    page: tuple[Page, Watch], stack: Stack
) -> None:
    p, watch = page
    # The page is open first: the entry comes with its emit event, as it is made.
    sign_in(p, stack, f"#/automation/{TYPE}")
    expect(p.locator("#live")).to_have_text("live")
    text = f"emitted {uuid.uuid4().hex[:6]}"
    (task_id,) = _batch(stack, [{"payload": {"text": text, "fail_first": True}, "max_attempts": 3}])
    assert _ended(stack, [task_id]) == ["done"]
    entry = p.locator("#tail li", has=p.locator("pre", has_text=f"echo: {text}"))
    expect(entry.locator(f".tail-meta a[href='#/task/{TYPE}/{task_id}']")).to_have_text(task_id)
    attempt = entry.locator("[data-role=entry-attempt]")
    expect(attempt).to_have_text("attempt 2")  # the first attempt failed before emitting
    attempt.click()
    view = p.locator(f"#task[data-task='{task_id}']")
    expect(view.locator("table.attempts tr.picked")).to_have_attribute("data-attempt", "2")
    # The task's own outputs say which attempt emitted them, the same way.
    out = view.locator("table.outputs tbody tr", has_text=f"echo: {text}")
    expect(out.locator("[data-role=output-attempt]")).to_have_text("2")
    assert not watch.errors, watch.errors
