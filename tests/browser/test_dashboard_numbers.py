"""The automation page's charts against a known workload (issue 42, item 4), in
Chromium: the failure rate counts each attempt once (3 of 6, not 62 %), the p95 is
shown as an estimate with its bucket, the charts have axes, and each point shows its
time and value on hover."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from playwright.sync_api import Page, expect

from fleet.backends import open_backend
from tests.browser.stack import Stack, running_stack
from tests.browser.test_dashboard import Watch, browser, page, sign_in
from tests.master.test_history_numbers import TYPE, seed_workload

__all__ = ["browser", "page"]  # the fixtures this module reuses


@pytest.fixture(scope="module", params=["sqlite"])
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    yield from running_stack(request, tmp_path_factory, "numbers")


def _seed(url: str) -> None:
    async def go() -> None:
        b = await open_backend(url)
        try:
            await seed_workload(b)
        finally:
            await b.close()

    # Playwright's sync API holds this thread's event loop: seed from another thread.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, go()).result()


def test_the_charts_tell_the_workloads_numbers(page: tuple[Page, Watch], stack: Stack) -> None:
    p, watch = page
    _seed(stack.backend_url)
    sign_in(p, stack, f"#/automation/{TYPE}")
    charts = p.locator("[data-role=history][data-window='1h']").first
    expect(charts.locator("[data-role=failure-rate]")).to_have_text("50 %")
    caption = charts.locator("[data-chart=failures] figcaption")
    expect(caption).to_contain_text("3 of 6 attempts")
    expect(caption).to_contain_text("2 timed out")
    expect(charts.locator("[data-role=completed]")).to_have_text("3")
    p95 = charts.locator("[data-role=p95]")
    expect(p95).to_have_text(_re(r"^≈ "))
    assert "an estimate" in (p95.get_attribute("title") or "")
    expect(charts.locator("[data-role=p95-bucket]")).to_contain_text("30")
    # axes: the top value and the window's first and last times
    failures = charts.locator("[data-chart=failures] svg")
    expect(failures.locator("[data-axis=top]")).to_have_text("100%")
    expect(failures.locator("[data-axis=start]")).to_have_text(_re(r"^\d\d:\d\d$"))
    # hover: the last point (this minute) says its failure share
    last = failures.locator("rect.spark-hit").last
    assert float(last.get_attribute("data-value") or "nan") == 50.0
    expect(last.locator("title")).to_have_text(_re(r"^\d\d:\d\d: 50 %$"))
    assert failures.locator("rect.spark-hit").count() == 60
    assert not watch.errors, watch.errors


def _re(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)
