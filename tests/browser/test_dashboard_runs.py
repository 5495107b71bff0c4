"""The dashboard's runs: the list shows a run, its page follows it live to ``done``
(counters, progress, per type), and "Cancel run" ends a run ``cancelled``, on
SQLite and on Redis."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from tests.browser.stack import Stack
from tests.browser.test_dashboard import Watch, browser, page, shot, sign_in, stack

__all__ = ["browser", "page", "stack"]  # the fixtures this module reuses

TYPE = "dash-echo"


def _run(stack: Stack, name: str) -> str:
    r = stack.api("POST", "/runs", {"name": name})
    assert r.status_code == 201, r.text
    return str(r.json()["run_id"])


def _submit(stack: Stack, run: str, n: int, **extra: object) -> None:
    """One batch: a run ends the moment nothing of it is left, so tasks submitted one
    by one could end it after the first (a crawl's pages submit their links)."""
    tasks = [{"payload": {"text": f"{run} page {i}"}, "run": run, **extra} for i in range(n)]
    r = stack.api("POST", f"/automations/{TYPE}/tasks/batch", {"tasks": tasks})
    assert r.status_code == 202, r.text
    assert all(x.get("queued") for x in r.json()["results"]), r.text


def test_a_run_page_follows_a_run_to_done(
    page: tuple[Page, Watch], stack: Stack, tmp_path: Path
) -> None:
    p, _ = page
    run = _run(stack, "crawl example.com")
    sign_in(p, stack, f"#/run/{run}")
    view = p.locator(f"#run[data-run='{run}']")
    expect(view.locator("h2 [data-state]")).to_have_text("running")
    expect(view.locator("[data-counter=submitted]")).to_have_text("0")
    _submit(stack, run, 5)
    # The page polls: it follows the run to its end without a reload.
    expect(view.locator("h2 [data-state]")).to_have_text("done", timeout=30_000)
    expect(view.locator("[data-counter=done]")).to_have_text("5")
    expect(view.locator("[data-counter=pending]")).to_have_text("0")
    expect(view.locator(f"tr[data-type='{TYPE}']")).to_contain_text("5")
    expect(view.locator(".run-progress")).to_contain_text("5 / 5")
    expect(view.locator("[data-action=cancel-run]")).to_have_count(0)  # an ended run
    shot(p, "run", tmp_path)
    p.click("#nav a[data-route=runs]")
    row = p.locator(f"#runs tr[data-run='{run}']")
    expect(row).to_contain_text("crawl example.com")
    expect(row).to_contain_text("done")
    expect(row).to_contain_text("5 / 5")
    row.locator("a").click()
    expect(p.locator(f"#run[data-run='{run}'] h2 [data-state]")).to_have_text("done")


def test_cancel_a_run_from_its_page(page: tuple[Page, Watch], stack: Stack) -> None:
    p, watch = page
    run = _run(stack, "to cancel")
    _submit(stack, run, 3, delay_seconds=3600)  # scheduled: they wait for the cancel
    sign_in(p, stack, f"#/run/{run}")
    view = p.locator(f"#run[data-run='{run}']")
    expect(view.locator("[data-counter=pending]")).to_have_text("3")
    view.locator("[data-action=cancel-run]").click()
    expect(view.locator("h2 [data-state]")).to_have_text("cancelled")
    expect(view.locator("[data-counter=cancelled]")).to_have_text("3")
    assert any("Cancel run" in d for d in watch.dialogs), watch.dialogs
    assert stack.api("GET", f"/runs/{run}").json()["state"] == "cancelled"


def test_an_unknown_run_says_so(page: tuple[Page, Watch], stack: Stack) -> None:
    p, _ = page
    sign_in(p, stack, "#/run/no-such-run")
    expect(p.locator("#run [data-role=run-detail]")).to_contain_text("No such run")
