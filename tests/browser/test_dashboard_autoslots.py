"""``slots: "auto"`` set in the dashboard's config editor (the slots field takes a
number or "auto"), then shown in the workers view: the count the worker chose and
the signal that held it, as its stats frame and ``/metrics`` say. On SQLite."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.stack import ADMIN_TOKEN, Stack, running_stack
from tests.browser.test_dashboard import Watch, browser, page, sign_in

__all__ = ["browser", "page"]  # the fixtures this module reuses

TYPE = "dash-echo"


@pytest.fixture(scope="module", params=["sqlite"])
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    yield from running_stack(request, tmp_path_factory, "dash-auto")


def test_auto_slots_are_set_and_shown(page: tuple[Page, Watch], stack: Stack) -> None:
    p, _ = page
    sign_in(p, stack, f"#/automation/{TYPE}")
    slots = p.locator("#cfg-slots")
    expect(slots).to_be_visible()
    expect(p.locator("#config-editor .field-numword")).to_contain_text('integer or "auto"')
    # A misspelt keyword comes back as the server's 422, at the field.
    slots.fill("atuo")
    p.click("#config-editor button[type=submit]")
    expect(p.locator("#config-editor [data-error-for=slots]")).to_contain_text('or "auto"')
    slots.fill("Auto")
    p.fill("#cfg-min_slots", "1")
    p.fill("#cfg-max_slots", "3")
    p.click("#config-editor button[type=submit]")
    expect(p.locator("#config-editor .note-ok")).to_contain_text("pushed to 1 worker")
    try:
        stored = stack.api("GET", f"/automations/{TYPE}/config").json()["config"]
        assert (stored["slots"], stored["max_slots"]) == ("auto", 3)

        p.goto(f"{stack.url}/#/workers")
        row = p.locator(f"#workers tr[data-worker='{stack.worker_id}'][data-type='{TYPE}']")
        auto = row.locator("[data-stat=autoslots]")
        # The worker starts at min_slots; no task waits, so it holds: "idle".
        expect(auto).to_have_text(re.compile(r"^ auto 1 \((idle|warming)\)$"))
        expect(auto).to_have_attribute("title", "min 1 · max 3")
        (view,) = [
            w
            for w in stack.api("GET", f"/automations/{TYPE}/workers").json()
            if w["worker_id"] == stack.worker_id
        ]
        assert view["autoslots"]["slots"] == 1 and view["autoslots"]["max_slots"] == 3
        metrics = httpx.get(
            f"{stack.url}/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        ).text
        labels = f'type="{TYPE}",worker="{stack.worker_id}"'
        assert f"fleet_worker_auto_slots{{{labels}}} 1.0" in metrics
        assert re.search(
            rf'fleet_worker_auto_slots_limit{{signal="(idle|warming)",{labels}}} 1.0', metrics
        ), metrics
    finally:
        stack.api("PATCH", f"/automations/{TYPE}/config?replace=true", json={})
