"""The dashboard's schedules table: a schedule created over REST is listed, pauses
with one click, and "Run now" enqueues a task the worker then runs."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.browser.stack import Stack
from tests.browser.test_dashboard import Watch, browser, open_automation, page, shot, stack

__all__ = ["browser", "page", "stack"]  # the fixtures this module reuses


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)  # the page is backend-blind
def test_schedules_table_pauses_and_runs_now(
    page: tuple[Page, Watch], stack: Stack, tmp_path: Path
) -> None:
    p, _ = page
    sid = f"hourly-{uuid.uuid4().hex[:6]}"
    body = {"id": sid, "every_seconds": 3600, "payload": {"text": f"tick {sid}"}}
    r = stack.api("POST", "/automations/dash-echo/schedules", body)
    assert r.status_code == 201, r.text
    open_automation(p, stack)
    row = p.locator(f"#schedules tr[data-schedule='{sid}']")
    expect(row).to_contain_text("every 1h")
    expect(row.locator("[data-role=schedule-state]")).to_have_text("enabled")
    expect(row).to_contain_text("(in ")
    shot(p, "schedules", tmp_path)
    row.locator("[data-action=pause]").click()
    expect(p.locator("#schedules .note-ok")).to_contain_text(f"Paused {sid}")
    expect(row.locator("[data-role=schedule-state]")).to_have_text("paused")
    assert stack.api("GET", f"/automations/dash-echo/schedules/{sid}").json()["enabled"] is False
    row.locator("[data-action=run]").click()
    done = p.locator("#schedules .note-ok")
    expect(done).to_contain_text(f"Run of {sid} queued")
    match = re.search(r"task (\S+)\.$", done.inner_text())
    assert match is not None
    task_id = match.group(1)
    assert task_id.startswith(f"schedule:{sid}:run:")
    expect(row.locator("[data-role=schedule-task]")).to_have_text(task_id)
    stack.wait_for(
        lambda: (
            stack.api("GET", f"/automations/dash-echo/tasks/{task_id}").json()["state"] == "done"
        ),
        timeout=30,
        what="the run-now task done",
    )
    row.locator("[data-action=resume]").click()
    expect(row.locator("[data-role=schedule-state]")).to_have_text("enabled")
    r = stack.api("DELETE", f"/automations/dash-echo/schedules/{sid}")
    assert r.status_code == 200
    p.click("#schedules .toolbar button")
    expect(row).to_have_count(0)
