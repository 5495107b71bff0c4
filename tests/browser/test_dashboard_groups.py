"""The dashboard's groups table: a paused group shows its pending tasks and resumes
with one click; the worker then drains it."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.browser.stack import Stack
from tests.browser.test_dashboard import Watch, browser, open_automation, page, shot, stack

__all__ = ["browser", "page", "stack"]  # the fixtures this module reuses


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)  # the page is backend-blind
def test_groups_table_pauses_and_resumes(
    page: tuple[Page, Watch], stack: Stack, tmp_path: Path
) -> None:
    p, _ = page
    group = f"shop-{uuid.uuid4().hex[:6]}.example"
    # A rate of one a minute keeps the group (and its row) alive after the resume.
    body = {"paused": True, "rate": "1/m"}
    r = stack.api("PUT", f"/automations/dash-echo/groups/{group}", body)
    assert r.status_code == 200, r.text
    tasks = [{"payload": {"text": f"g{i}"}, "group": group} for i in range(3)]
    r = stack.api("POST", "/automations/dash-echo/tasks/batch", {"tasks": tasks})
    assert r.status_code == 202, r.text
    open_automation(p, stack)
    row = p.locator(f"#groups tr[data-group='{group}']")
    expect(row).to_contain_text("paused")
    expect(row.locator("td").nth(1)).to_have_text("3")
    expect(row).to_contain_text("1/m (own)")
    shot(p, "groups", tmp_path)
    row.locator("[data-action=resume]").click()
    expect(p.locator("#groups .note-ok")).to_contain_text(f"Resumed {group}")
    expect(row.locator("[data-action=pause]")).to_be_visible()  # re-read after the click

    def one_started() -> bool:
        g = stack.api("GET", f"/automations/dash-echo/groups/{group}").json()
        return bool(g["pending"] == 2 and not g["paused"])

    stack.wait_for(one_started, timeout=30, what="one task of the resumed group started")
    p.click("#groups .toolbar button")
    expect(row.locator("td").nth(1)).to_have_text("2")
    expect(row.locator("[data-role=group-state]")).to_contain_text("held until")  # its rate
    row.locator("[data-action=pause]").click()
    expect(p.locator("#groups .note-ok")).to_contain_text(f"Paused {group}")
    expect(row.locator("[data-role=group-state]")).to_have_text("paused")
    assert stack.api("GET", f"/automations/dash-echo/groups/{group}").json()["settings"] == {
        "concurrency": None,
        "rate": "1/m",
        "paused": True,
    }
