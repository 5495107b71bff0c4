"""A run's page shows its budget and pauses and resumes it (docs/costs.md), in Chromium
against a real master, on SQLite and on Redis: "Pause" pauses a running run (the page
shows it paused with its reason), "Resume" with a typed budget resumes it with that
budget; a run its meters paused at its budget shows why, and "Resume" without a raised
budget shows the API's 422 and leaves it paused.

The run's tasks are scheduled an hour out: the stack's worker leaves them be, so the
run stays open whatever the test does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import Locator, Page, expect

from fleet.backends.base import Backend
from fleet.core.meters import MeterBatch, run_scope
from tests.browser.stack import Stack, on_backend
from tests.browser.test_dashboard import Watch, browser, page, shot, sign_in, stack

__all__ = ["browser", "page", "stack"]  # the fixtures this module reuses

TYPE = "dash-echo"


def _run(stack: Stack, name: str, budget: dict[str, float]) -> str:
    r = stack.api("POST", "/runs", {"name": name, "budget": budget})
    assert r.status_code == 201, r.text
    return str(r.json()["run_id"])


def _push(stack: Stack, run: str, n: int) -> None:
    tasks = [
        {"payload": {"text": f"{run} page {i}"}, "run": run, "delay_seconds": 3600}
        for i in range(n)
    ]
    r = stack.api("POST", f"/automations/{TYPE}/tasks/batch", {"tasks": tasks})
    assert r.status_code == 202, r.text
    assert all(x.get("queued") for x in r.json()["results"]), r.text


def _record(stack: Stack, run: str) -> dict[str, Any]:
    r = stack.api("GET", f"/runs/{run}")
    assert r.status_code == 200, r.text
    return dict(r.json())


def _meter(stack: Stack, run: str, meter: str, amount: float) -> None:
    """Meters of the run, as a worker's flush adds them."""

    async def work(backend: Backend) -> None:
        batch = MeterBatch()
        batch.add([run_scope(run)], meter, amount)
        await backend.meters.add(batch)

    on_backend(stack, work)


def _open(p: Page, stack: Stack, run: str) -> Locator:
    sign_in(p, stack, f"#/run/{run}")
    view = p.locator(f"#run[data-run='{run}']")
    expect(view.locator("[data-counter=submitted]")).to_have_text("2")
    return view


def test_pause_and_resume_a_run_with_a_new_budget(page: tuple[Page, Watch], stack: Stack) -> None:
    p, watch = page
    run = _run(stack, "paused by hand", {"bytes": 1e6})
    _push(stack, run, 2)
    view = _open(p, stack, run)
    state = view.locator("h2 [data-state]")
    expect(state).to_have_text("running")
    expect(view.locator("[data-role=run-budget]")).to_have_text("bytes 1.00 MB (1.00 MB left)")
    expect(view.locator("[data-action=resume-run]")).to_have_count(0)
    expect(view.locator("[data-action=cancel-run]")).to_be_visible()

    view.locator("[data-action=pause-run]").click()
    expect(state).to_have_text("paused")
    expect(view.locator("[data-role=run-state]")).to_contain_text("paused — paused by an operator")
    expect(view.locator(".messages .note-ok")).to_have_text("Run paused.")
    expect(view.locator("[data-action=pause-run]")).to_have_count(0)
    expect(view.locator("[data-action=cancel-run]")).to_be_visible()  # a paused run too
    assert any(d.startswith(f"Pause run {run}?") for d in watch.dialogs), watch.dialogs
    record = _record(stack, run)
    assert record["state"] == "paused", record
    assert record["paused_reason"] == "paused by an operator", record

    # A budget that is not METER=CAP is refused in the page: nothing is asked of the API.
    asked = len(watch.dialogs)
    view.locator("[data-role=resume-budget]").fill("bytes")
    view.locator("[data-action=resume-run]").click()
    expect(view.locator(".messages .note-error")).to_contain_text('"bytes" is not METER=CAP')
    assert len(watch.dialogs) == asked
    assert _record(stack, run)["state"] == "paused"

    # The page polls while the run is paused: the input keeps what is typed.
    view.locator("[data-role=resume-budget]").fill("bytes=2e6, spend=50")
    p.wait_for_timeout(2500)
    expect(view.locator("[data-role=resume-budget]")).to_have_value("bytes=2e6, spend=50")
    view.locator("[data-action=resume-run]").click()
    expect(state).to_have_text("running")
    expect(view.locator(".messages .note-ok")).to_have_text("Run resumed.")
    expect(view.locator("[data-role=run-state]")).to_have_count(0)
    budget = view.locator("[data-role=run-budget]")
    expect(budget.locator("[data-cap=bytes]")).to_have_text("bytes 2.00 MB (2.00 MB left)")
    expect(budget.locator("[data-cap=spend]")).to_have_text("spend 50.00 (50.00 left)")
    expect(view.locator("[data-action=pause-run]")).to_be_visible()
    assert any("with the budget bytes=2000000, spend=50" in d for d in watch.dialogs), watch.dialogs
    record = _record(stack, run)
    assert record["state"] == "running", record
    assert record["budget"] == {"bytes": 2e6, "spend": 50.0}, record
    assert stack.api("DELETE", f"/runs/{run}").status_code == 200


def test_resume_at_the_budget_shows_the_error(
    page: tuple[Page, Watch], stack: Stack, tmp_path: Path
) -> None:
    p, watch = page
    run = _run(stack, "paused by its budget", {"bytes": 1e6})
    _push(stack, run, 2)
    view = _open(p, stack, run)
    state = view.locator("h2 [data-state]")
    expect(state).to_have_text("running")

    # Meters past the budget pause the run; the page (polling) shows it and why.
    _meter(stack, run, "bytes_received", 2e6)
    expect(state).to_have_text("paused")
    expect(view.locator("[data-role=run-state]")).to_contain_text(
        "paused — budget reached: bytes 2e+06 of 1e+06"
    )
    expect(view.locator("[data-role=run-budget]")).to_have_text("bytes 1.00 MB (0 B left)")
    expect(view.locator("[data-role=run-meters] [data-meter=bytes_received]")).to_have_text(
        "bytes_received 2.00 MB"
    )

    # Resume without a raised budget: the API's 422, shown; the run stays paused.
    expect(view.locator("[data-role=resume-budget]")).to_have_value("")
    view.locator("[data-action=resume-run]").click()
    error = view.locator(".messages .note-error")
    expect(error).to_contain_text("Resume: ")
    expect(error).to_contain_text("the run is still at its budget")
    expect(error).to_contain_text("resume with a raised budget")
    assert any(d.startswith(f"Resume run {run}?") for d in watch.dialogs), watch.dialogs
    expect(state).to_have_text("paused")
    assert _record(stack, run)["state"] == "paused"
    shot(p, "run-paused", tmp_path)

    # Raised: it runs again.
    view.locator("[data-role=resume-budget]").fill("bytes=5e6")
    view.locator("[data-action=resume-run]").click()
    expect(state).to_have_text("running")
    expect(view.locator(".messages .note-error")).to_have_count(0)
    expect(view.locator("[data-role=run-budget]")).to_have_text("bytes 5.00 MB (3.00 MB left)")
    record = _record(stack, run)
    assert record["state"] == "running", record
    assert record["budget"] == {"bytes": 5e6}, record
    assert stack.api("DELETE", f"/runs/{run}").status_code == 200


def test_a_reason_is_text_and_a_typed_budget_parses(page: tuple[Page, Watch], stack: Stack) -> None:
    p, _ = page
    evil = "<img src=x onerror=alert(1)> too fast"
    run = _run(stack, "paused over the API", {"spend": 5, "solver_calls": 100})
    _push(stack, run, 2)
    r = stack.api("POST", f"/runs/{run}/pause", {"reason": evil})
    assert r.status_code == 200, r.text
    view = _open(p, stack, run)
    expect(view.locator("[data-role=run-state]")).to_contain_text(f"paused — {evil} (")
    expect(view.locator("img")).to_have_count(0)
    budget = view.locator("[data-role=run-budget]")
    expect(budget).to_have_text("solver_calls 100 (100 left) · spend 5.00 (5.00 left)")
    parsed = p.evaluate(
        """async () => {
        const { parseBudget } = await import("/js/views/runs.js");
        const bad = (text) => {
          try { parseBudget(text); return null; } catch (e) { return e.message; }
        };
        return {
          empty: [parseBudget(""), parseBudget("  "), parseBudget(" , ")],
          caps: parseBudget(" bytes=2e6, spend = 50 ,solver_calls=1000,"),
          tier: parseBudget("bytes:residential=5e9"),
          bad: ["bytes", "=5", "spend=", "spend=lots", "spend=1e999"].map(bad),
        };
    }"""
    )
    assert parsed["empty"] == [None, None, None]
    assert parsed["caps"] == {"bytes": 2e6, "spend": 50, "solver_calls": 1000}
    assert parsed["tier"] == {"bytes:residential": 5e9}
    assert all(m and "is not METER=CAP" in m for m in parsed["bad"]), parsed["bad"]
    assert stack.api("DELETE", f"/runs/{run}").status_code == 200
