"""A run's page shows its monitors (docs/monitors.md), in Chromium against a real master
and worker, on SQLite and Redis: a run that asked for more items than its task emitted
ends with ``min_items`` firing (its row in the error style, with the value, the
threshold and since when); one with no dead task shows ``max_error_rate`` ``ok``, plain; a monitor
that fired and no longer does shows ``resolved``, muted; a run without monitors shows
no Monitors section."""

from __future__ import annotations

import json
import time

from playwright.sync_api import Page, expect

from fleet.backends.base import Backend
from fleet.master.services.monitors import NAMESPACE
from tests.browser.stack import Stack, on_backend
from tests.browser.test_dashboard import Watch, browser, page, sign_in, stack

__all__ = ["browser", "page", "stack"]  # the fixtures this module reuses

TYPE = "dash-echo"


def _run(stack: Stack, name: str, monitors: dict[str, object] | None, text: str) -> str:
    body: dict[str, object] = {"name": name}
    if monitors is not None:
        body["monitors"] = monitors
    r = stack.api("POST", "/runs", body)
    assert r.status_code == 201, r.text
    run = str(r.json()["run_id"])
    # One task that runs now and emits two items (itself and one extra): the run ends.
    task = {"payload": {"text": text, "extra": 1}, "run": run}
    r = stack.api("POST", f"/automations/{TYPE}/tasks", task)
    assert r.status_code in (200, 201, 202), r.text
    return run


def test_a_runs_monitors_show_on_its_page(page: tuple[Page, Watch], stack: Stack) -> None:
    p, watch = page
    short = _run(stack, "too few", {"min_items": 5}, "few")
    clean = _run(stack, "clean", {"max_error_rate": 0.5}, "clean")
    plain = _run(stack, "no monitors", None, "plain")

    sign_in(p, stack, f"#/run/{short}")
    view = p.locator(f"#run[data-run='{short}']")
    expect(view.locator("[data-state=done]").first).to_be_visible(timeout=30_000)
    expect(view.locator("[data-role=run-monitors] tbody tr")).to_have_count(1)
    firing = view.locator("[data-role=run-monitors] [data-monitor=min_items]")
    expect(firing).to_have_attribute("data-state", "firing", timeout=20_000)
    expect(firing).to_have_class("error-text")
    expect(firing.locator("[data-col=state]")).to_have_text("firing")
    # Both items counted once the worker's meters landed.
    expect(firing.locator("[data-col=value]")).to_have_text("2", timeout=20_000)
    expect(firing.locator("[data-col=threshold]")).to_have_text("5")
    expect(firing.locator("[data-col=since]")).to_contain_text("ago")
    expect(view.locator("h3", has_text="Monitors")).to_have_count(1)

    p.goto(f"{stack.url}/#/run/{clean}")
    view = p.locator(f"#run[data-run='{clean}']")
    ok = view.locator("[data-role=run-monitors] [data-monitor=max_error_rate]")
    expect(view.locator("[data-state=done]").first).to_be_visible(timeout=30_000)
    expect(ok).to_have_attribute("data-state", "ok", timeout=20_000)
    expect(ok).not_to_have_class("error-text")
    expect(ok).not_to_have_class("muted")
    expect(ok.locator("[data-col=value]")).to_have_text("0 %")
    expect(ok.locator("[data-col=threshold]")).to_have_text("50 %")

    # Had it fired before (the sweeper's kept states say so), it now shows resolved.
    async def resolve(backend: Backend) -> None:
        now = time.time()
        states = [
            {
                "monitor": "max_error_rate",
                "state": "resolved",
                "value": 1,
                "threshold": 0.5,
                "since": now,
            },
        ]
        value = {"states": states, "outputs": 2, "output_at": now, "final": True}
        await backend.kv.set(NAMESPACE, f"state:{clean}", json.dumps(value), ttl_seconds=600)

    on_backend(stack, resolve)
    p.reload()
    resolved = p.locator(
        f"#run[data-run='{clean}'] [data-role=run-monitors] [data-monitor=max_error_rate]"
    )
    expect(resolved).to_have_attribute("data-state", "resolved", timeout=20_000)
    expect(resolved).to_have_class("muted")
    expect(resolved.locator("[data-col=value]")).to_have_text("0 %")

    p.goto(f"{stack.url}/#/run/{plain}")
    view = p.locator(f"#run[data-run='{plain}']")
    expect(view.locator("[data-state=done]").first).to_be_visible(timeout=30_000)
    expect(view.locator("[data-counter=submitted]")).to_have_text("1")
    expect(view.locator("[data-role=run-monitors]")).to_have_count(0)
    expect(view.locator("h3", has_text="Monitors")).to_have_count(0)
    assert watch.dialogs == []
