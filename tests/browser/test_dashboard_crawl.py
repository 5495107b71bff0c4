"""A crawl's run page shows its figures (docs/crawling.md), in Chromium against a real
master: pages, items, robots-skipped and not-modified pages from the run's meters, and
its duplicates from its counters; a run that is no crawl shows no crawl figures."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from fleet.backends.base import Backend
from fleet.core.meters import MeterBatch, run_scope
from tests.browser.stack import Stack, on_backend
from tests.browser.test_dashboard import Watch, browser, page, sign_in, stack

__all__ = ["browser", "page", "stack"]  # the fixtures this module reuses

TYPE = "dash-echo"


def _run(stack: Stack, name: str) -> str:
    r = stack.api("POST", "/runs", {"name": name})
    assert r.status_code == 201, r.text
    run = str(r.json()["run_id"])
    # Two tasks with the same unique key: one queued, one duplicate (an hour out, so
    # the stack's worker leaves them be and the run stays open).
    tasks = [
        {"payload": {"text": "p"}, "run": run, "unique_key": "http://a/", "delay_seconds": 3600}
        for _ in range(2)
    ]
    r = stack.api("POST", f"/automations/{TYPE}/tasks/batch", {"tasks": tasks})
    assert r.status_code == 202, r.text
    return run


def test_a_crawl_shows_its_figures(page: tuple[Page, Watch], stack: Stack) -> None:
    p, watch = page
    crawl = _run(stack, "a crawl")
    other = _run(stack, "no crawl")

    async def work(backend: Backend) -> None:
        batch = MeterBatch()
        for meter, amount in (("pages", 120), ("items", 118), ("robots_skipped", 3)):
            batch.add([run_scope(crawl)], meter, amount)
        await backend.meters.add(batch)

    on_backend(stack, work)
    sign_in(p, stack, f"#/run/{crawl}")
    figures = p.locator(f"#run[data-run='{crawl}'] [data-role=run-crawl]")
    expect(figures.locator("[data-figure=pages] dd")).to_have_text("120")
    expect(figures.locator("[data-figure=items] dd")).to_have_text("118")
    expect(figures.locator("[data-figure=robots_skipped] dd")).to_have_text("3")
    expect(figures.locator("[data-figure=not_modified] dd")).to_have_text("0")
    expect(figures.locator("[data-figure=duplicates] dd")).to_have_text("1")
    p.goto(f"{stack.url}/#/run/{other}")
    view = p.locator(f"#run[data-run='{other}']")
    expect(view.locator("[data-counter=submitted]")).to_have_text("1")
    expect(view.locator("[data-role=run-crawl]")).to_have_count(0)
    assert watch.dialogs == []
