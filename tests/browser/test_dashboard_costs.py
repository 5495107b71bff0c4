"""What a type spent, in the dashboard (docs/costs.md), in Chromium against a real master
and worker: the Costs panel of the type's page shows one short line before anything is
metered; then the last 24 hours' spend and main meters (the sums of the hours, bytes in
KB/MB/GB), spend by hour as bars, and the top five domains by spend; it re-reads on its
own; it stays a short band. A run's page shows the run's meters: seeded ones formatted,
and the attempts the worker's own meters add while the page is open. On SQLite: the
panel is backend-blind.

The tests run in this order on one stack: the first needs a type nothing metered yet
(the second makes the worker run tasks)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect

from fleet.backends.base import Backend
from fleet.core import clock
from fleet.core.meters import HOUR, MeterBatch, hour_scope
from tests.browser.stack import READ_TOKEN, Stack, on_backend, running_stack
from tests.browser.test_dashboard import Watch, browser, page, shot, sign_in

__all__ = ["browser", "page"]  # the fixtures this module reuses

TYPE = "dash-echo"
#: Spend of the domains :func:`seed` meters (all time), and the top five it makes:
#: by spend, a tie by name; a domain that spent nothing is not ranked.
DOMAINS: dict[str, dict[str, float]] = {
    "a-cheap.test": {"spend": 0.01, "requests": 1},
    "b-big.test": {"spend": 5.0, "requests": 100, "bytes_received": 2_000_000_000},
    "c-free.test": {"requests": 3, "bytes_received": 900},
    "d-mid.test": {"spend": 1.5, "requests": 12, "bytes_received": 45_000},
    "e-tiny.test": {"spend": 0.0005, "requests": 5},
    "f-top.test": {"spend": 7.25, "requests": 30, "bytes_received": 12_500_000},
    "g-tie.test": {"spend": 1.5, "requests": 2},
}
TOP = ["f-top.test", "b-big.test", "d-mid.test", "g-tie.test", "a-cheap.test"]


@pytest.fixture(scope="module", params=["sqlite"])
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    yield from running_stack(request, tmp_path_factory, "dash-costs")


def meter(stack: Stack, scopes: dict[str, dict[str, float]]) -> None:
    """One batch of meters, as a worker's flush adds it."""

    async def work(b: Backend) -> None:
        await b.meters.add(MeterBatch(scopes))

    on_backend(stack, work)


def seed(stack: Stack) -> None:
    """Three hours of the last 24 (now, 3 h ago, 22 h ago: an hour's turn between the seed
    and the read keeps them in) and one older, the type's totals, and the domains."""
    now = clock.now()
    hours = {
        0: {"spend": 0.5, "attempts": 10, "requests": 40, "bytes_received": 3_500_000,
            "solves": 2, "browser_seconds": 12.5},
        3: {"spend": 1.25, "attempts": 5, "requests": 10, "bytes_received": 1_000_000,
            "browser_seconds": 2.5},
        22: {"spend": 0.25, "attempts": 1, "requests": 2, "bytes_received": 500},
        30: {"spend": 100.0, "attempts": 100, "requests": 900},  # before the 24 h
    }  # fmt: skip
    scopes = {hour_scope(TYPE, now - ago * HOUR): m for ago, m in hours.items()}
    totals: dict[str, float] = {}
    for m in hours.values():
        for name, v in m.items():
            totals[name] = totals.get(name, 0.0) + v
    scopes[f"type:{TYPE}"] = totals
    for domain, m in DOMAINS.items():
        scopes[f"domain:{TYPE}:{domain}"] = m
    meter(stack, scopes)


def figure(p: Page, name: str) -> Locator:
    return p.locator(f"#costs [data-meter={name}] dd")


def panel_height(p: Page) -> float:
    box = p.locator("#costs").bounding_box()
    assert box is not None
    return float(box["height"])


def test_the_costs_panel_shows_the_last_24h_and_the_top_domains(
    page: tuple[Page, Watch], stack: Stack, tmp_path: Path
) -> None:
    p, watch = page
    # Nothing metered: one short line, the panel stays small.
    sign_in(p, stack, f"#/automation/{TYPE}", token=READ_TOKEN)
    expect(p.locator("#costs .empty")).to_have_text("Nothing metered yet.")
    expect(p.locator("#costs h3")).to_have_text("Costs")
    expect(p.locator("#costs svg")).to_have_count(0)
    expect(p.locator("#costs table")).to_have_count(0)
    assert panel_height(p) < 110

    # Metered while the page is open: the panel re-reads on its own (every ~12 s).
    seed(stack)
    expect(figure(p, "spend")).to_have_text("2.00", timeout=20_000)
    expect(p.locator("#costs .empty")).to_have_count(0)
    # The sums of the last 24 hours (not the hour 30 h ago, nor the type's totals).
    expect(figure(p, "attempts")).to_have_text("16")
    expect(figure(p, "requests")).to_have_text("52")
    expect(figure(p, "bytes_received")).to_have_text("4.50 MB")
    expect(figure(p, "solves")).to_have_text("2")
    expect(figure(p, "browser_seconds")).to_have_text("15.00")
    expect(p.locator("#costs [data-role=costs-all]")).to_have_text("last 24h · spend 102.00 in all")

    # Spend by hour: 24 bars, oldest first, three of them not empty, the tallest 1.25.
    bars = p.locator("#costs [data-chart=spend] rect.spark-bar")
    expect(bars).to_have_count(24)
    values = [float(v or 0) for v in (b.get_attribute("data-value") for b in bars.all())]
    assert [v for v in values if v] == [0.25, 1.25, 0.5], values
    assert values[-1] == 0.5 or values[-2] == 0.5, values  # this hour (or the last one)
    heights = [float(b.get_attribute("height") or 0) for b in bars.all()]
    tallest = heights[values.index(1.25)]
    assert tallest > heights[values.index(0.5)] > heights[values.index(0.25)] > 0, heights
    assert heights.count(0) == 21, heights
    expect(p.locator("#costs [data-chart=spend] [data-axis=top]")).to_have_text("1.25")

    # The top five domains by spend, a tie by name, the ones that spent nothing left out.
    rows = p.locator("#costs [data-role=top-domains] tbody tr")
    expect(rows).to_have_count(5)
    assert [r.get_attribute("data-domain") for r in rows.all()] == TOP
    top = p.locator("#costs tr[data-domain='f-top.test']")
    expect(top.locator("[data-col=spend]")).to_have_text("7.25")
    expect(top.locator("[data-col=requests]")).to_have_text("30")
    expect(top.locator("[data-col=received]")).to_have_text("12.50 MB")
    big = p.locator("#costs tr[data-domain='b-big.test']")
    expect(big.locator("[data-col=received]")).to_have_text("2.00 GB")
    expect(p.locator("#costs tr[data-domain='d-mid.test'] [data-col=received]")).to_have_text(
        "45.00 KB"
    )
    expect(p.locator("#costs tr[data-domain='a-cheap.test'] [data-col=spend]")).to_have_text("0.01")
    expect(p.locator("#costs tr[data-domain='e-tiny.test']")).to_have_count(0)

    # A short band: the figures, the chart and five rows side by side.
    assert panel_height(p) < 260, panel_height(p)
    shot(p, "costs", tmp_path)

    # After a reload too; and another view stops its reads.
    p.reload()
    expect(figure(p, "bytes_received")).to_have_text("4.50 MB")
    expect(rows).to_have_count(5)
    p.goto(f"{stack.url}/#/workers")
    expect(p.locator("#costs")).to_have_count(0)
    assert watch.errors == []


def test_a_run_page_shows_its_meters(page: tuple[Page, Watch], stack: Stack) -> None:
    p, _ = page
    # Seeded: every meter, spend first, bytes in KB/MB/GB, split ones after by name.
    r = stack.api("POST", "/runs", {"name": "seeded"})
    assert r.status_code == 201, r.text
    seeded = str(r.json()["run_id"])
    meter(
        stack,
        {
            f"run:{seeded}": {
                "spend": 0.42,
                "requests": 7,
                "requests:residential": 7,
                "bytes_received": 2_500_000,
                "api_credits": 3,
            }
        },
    )
    sign_in(p, stack, f"#/run/{seeded}")
    line = p.locator(f"#run[data-run='{seeded}'] [data-role=run-meters]")
    expect(line.locator("[data-meter=spend]")).to_have_text("spend 0.42")
    expect(line.locator("[data-meter=bytes_received]")).to_have_text("bytes_received 2.50 MB")
    expect(line.locator("[data-meter]")).to_have_count(5)
    names = [m.get_attribute("data-meter") for m in line.locator("[data-meter]").all()]
    assert names == ["spend", "requests", "bytes_received", "api_credits", "requests:residential"]
    expect(line).to_have_text(
        "spend 0.42 · requests 7 · bytes_received 2.50 MB · api_credits 3 · requests:residential 7"
    )
    box = line.bounding_box()
    assert box is not None and box["height"] < 40, box  # one line

    # Live: a run the worker works through, its page open from the start; the worker's
    # meters of the run (sent every 2 s) show without a reload, after the run ended too.
    r = stack.api("POST", "/runs", {"name": "metered"})
    assert r.status_code == 201, r.text
    run = str(r.json()["run_id"])
    p.goto(f"{stack.url}/#/run/{run}")
    view = p.locator(f"#run[data-run='{run}']")
    expect(view.locator("[data-role=run-meters]")).to_have_text("Nothing metered yet.")
    tasks = [{"payload": {"text": f"metered {i}"}, "run": run} for i in range(3)]
    r = stack.api("POST", f"/automations/{TYPE}/tasks/batch", {"tasks": tasks})
    assert r.status_code == 202, r.text
    expect(view.locator("h2 [data-state]")).to_have_text("done", timeout=30_000)
    expect(view.locator("[data-role=run-meters] [data-meter=attempts]")).to_have_text("attempts 3")
    expect(view.locator("[data-role=run-meters] [data-meter=run_seconds]")).to_contain_text(
        "run_seconds 0."
    )
    got = stack.api("GET", f"/runs/{run}").json()["meters"]
    assert got["attempts"] == 3, got


def test_an_unknown_type_has_no_costs_panel(page: tuple[Page, Watch], stack: Stack) -> None:
    p, _ = page
    sign_in(p, stack, "#/automation/no-such-type")
    expect(p.locator("#automation .note-error")).to_contain_text("Unknown automation no-such-type")
    expect(p.locator("#costs")).to_have_count(0)


def test_a_type_held_by_its_daily_budget_says_so(page: tuple[Page, Watch], stack: Stack) -> None:
    p, _ = page
    sign_in(p, stack, f"#/automation/{TYPE}", token=READ_TOKEN)
    expect(p.locator("#costs h3")).to_have_text("Costs")
    expect(p.locator("#costs [data-role=costs-held]")).to_be_hidden()
    r = stack.api("PATCH", f"/automations/{TYPE}/config", {"daily_budget": {"requests": 5}})
    assert r.status_code == 200, r.text
    meter(stack, {hour_scope(TYPE, clock.now()): {"requests": 10_000}})  # past it today
    p.reload()
    held = p.locator("#costs [data-role=costs-held]")
    expect(held).to_contain_text("held until ", timeout=20_000)
    expect(held).to_contain_text("UTC: daily budget reached: requests")
    # Raised above the day's requests: the hold ends before the 200, the line goes.
    r = stack.api("PATCH", f"/automations/{TYPE}/config", {"daily_budget": None})
    assert r.status_code == 200, r.text
    p.reload()
    expect(p.locator("#costs h3")).to_have_text("Costs")
    expect(p.locator("#costs [data-role=costs-held]")).to_be_hidden(timeout=20_000)
