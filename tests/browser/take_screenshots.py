"""Take the dashboard screenshots in docs/screenshots against a busy little fleet.

Run from the repository root: ``.venv/bin/python -m tests.browser.take_screenshots``.
It starts a real master and two workers on a temporary SQLite file, feeds them a
steady trickle of tasks (some failing, some dead-lettered) so the charts and the
DLQ have something to show, and drives Debian's Chromium through the pages.
"""

from __future__ import annotations

import tempfile
import threading
import time
import uuid
from pathlib import Path

from playwright.sync_api import Page, expect, sync_playwright

from tests.browser.stack import ADMIN_TOKEN, CHROMIUM, CHROMIUM_ARGS, REPO, Stack

DOCS_SHOTS = REPO / "docs" / "screenshots"


def feed(stack: Stack, stop: threading.Event) -> None:
    """About eight tasks a second: mostly fine, a few retried, a few dead."""
    n = 0
    while not stop.is_set():
        n += 1
        payload: dict[str, object] = {"text": f"item {n} <b>{uuid.uuid4().hex[:6]}</b>"}
        body: dict[str, object] = {"payload": payload}
        if n % 9 == 0:
            payload["fail_first"] = True
            body["max_attempts"] = 1
        elif n % 13 == 0:
            payload["fail"] = True
            body["max_attempts"] = 2
        stack.api("POST", "/automations/dash-echo/tasks", json=body)
        time.sleep(0.12)


def make_run(stack: Stack, name: str, n: int, delay: float) -> str:
    """A run of ``n`` echo tasks, submitted in one batch (``delay``: seconds ahead)."""
    run = str(stack.api("POST", "/runs", json={"name": name}).json()["run_id"])
    tasks = [
        {"payload": {"text": f"{name} {i}"}, "run": run, "delay_seconds": delay} for i in range(n)
    ]
    r = stack.api("POST", "/automations/dash-echo/tasks/batch", json={"tasks": tasks})
    assert r.status_code == 202, r.text
    return run


def shoot(page: Page, name: str) -> None:
    page.evaluate("window.scrollTo(0, 0)")  # else the sticky header lands mid-page
    page.screenshot(path=str(DOCS_SHOTS / f"{name}.png"), full_page=True)
    print(f"wrote docs/screenshots/{name}.png")


def main() -> None:
    DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        stack = Stack(
            backend_url=f"sqlite:///{Path(tmp) / 'fleet.db'}",
            logs=Path(tmp),
            extra_env={"FLEET_HISTORY_INTERVAL_SECONDS": "2"},
        )
        stop = threading.Event()
        feeder = threading.Thread(target=feed, args=(stack, stop), daemon=True)
        try:
            stack.start()
            stack.spawn_worker("dash-worker-2")
            # A third worker that has stopped, to show a worker that is not up.
            gone = stack.spawn_worker("dash-worker-3")
            stack.wait_for(
                lambda: any(
                    w["worker_id"] == "dash-worker-3" and w["up"]
                    for w in stack.api("GET", "/workers").json()
                ),
                30,
                "dash-worker-3",
            )
            gone.terminate()
            gone.wait(timeout=30)
            stack.procs.remove(gone)
            feeder.start()
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                page.goto(stack.url)
                page.fill("#token", ADMIN_TOKEN)
                page.click("#signin button[type=submit]")
                expect(page.locator(".type-card")).to_be_visible()
                page.wait_for_timeout(20_000)  # let the charts fill
                shoot(page, "overview")
                stack.api("POST", "/automations/dash-echo/workers/dash-worker-2/drain")
                page.click("#nav a[data-route=workers]")
                expect(page.locator("tr[data-worker='dash-worker-2']")).to_be_visible()
                page.wait_for_timeout(1000)
                shoot(page, "workers")
                stack.api("POST", "/automations/dash-echo/workers/dash-worker-2/resume")
                page.goto(f"{stack.url}/#/automation/dash-echo")
                page.fill("#cfg-slots", "2")
                page.click("#config-editor button[type=submit]")
                expect(page.locator("#config-editor .push .badge.ok")).to_have_count(
                    2, timeout=15_000
                )
                page.wait_for_timeout(1500)
                shoot(page, "automation")
                # Clip the full page (not the viewport) so the sticky header stays on top.
                # Dead tasks are the task browser's dead tab (dlq.png), finished ones its
                # done tab (tasks.png).
                page.click("#tasks [data-state=dead]")
                expect(page.locator("#tasks table.tasks tbody tr").first).to_be_visible()
                page.evaluate("window.scrollTo(0, 0)")
                box = page.locator("#tasks").bounding_box()
                assert box is not None
                page.screenshot(path=str(DOCS_SHOTS / "dlq.png"), full_page=True, clip=box)
                print("wrote docs/screenshots/dlq.png")
                dead_id = page.locator("#tasks table.tasks tbody tr").first.get_attribute(
                    "data-task"
                )
                page.click("#tasks [data-state=done]")
                expect(
                    page.locator("#tasks table.tasks[data-state=done] tbody tr").first
                ).to_be_visible()
                page.evaluate("window.scrollTo(0, 0)")
                box = page.locator("#tasks").bounding_box()
                assert box is not None
                page.screenshot(path=str(DOCS_SHOTS / "tasks.png"), full_page=True, clip=box)
                print("wrote docs/screenshots/tasks.png")
                page.goto(f"{stack.url}/#/task/dash-echo/{dead_id}")
                expect(page.locator("#task [data-role=payload]")).to_be_visible()
                shoot(page, "task")
                # A run: one finished, one still going (its tasks scheduled ahead).
                done_run = make_run(stack, "nightly crawl", 12, delay=0)
                make_run(stack, "catalogue refresh", 30, delay=600)
                stack.wait_for(
                    lambda: stack.api("GET", f"/runs/{done_run}").json()["state"] == "done",
                    60,
                    "the run done",
                )
                page.click("#nav a[data-route=runs]")
                expect(page.locator(f"#runs tr[data-run='{done_run}']")).to_be_visible()
                shoot(page, "runs")
                page.goto(f"{stack.url}/#/run/{done_run}")
                expect(page.locator("#run h2 [data-state]")).to_have_text("done")
                shoot(page, "run")
                phone = browser.new_page(viewport={"width": 390, "height": 844})
                phone.goto(stack.url)
                phone.fill("#token", ADMIN_TOKEN)
                phone.click("#signin button[type=submit]")
                expect(phone.locator(".type-card")).to_be_visible()
                phone.wait_for_timeout(6000)
                shoot(phone, "phone")
                browser.close()
        finally:
            stop.set()
            if feeder.is_alive():
                feeder.join(timeout=10)
            stack.stop()


if __name__ == "__main__":
    main()
