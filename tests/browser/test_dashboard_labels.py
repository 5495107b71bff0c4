"""The overview card labels its pending counts per tier, as the CLI does (high, normal,
low), in Debian's headless Chromium against a real master and worker.

The fixtures (one browser, a master and worker stack, a fresh tab) are the ones of
test_dashboard.py; the page's logic is backend-blind, so SQLite only.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.browser.stack import Stack
from tests.browser.test_dashboard import Watch, browser, page, sign_in, stack

pytestmark = pytest.mark.browser
__all__ = ["browser", "page", "stack"]  # fixtures used by name


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)
def test_pending_counts_are_labelled_by_tier(page: tuple[Page, Watch], stack: Stack) -> None:
    p, _ = page
    sign_in(p, stack)
    pending = p.locator(".type-card[data-type='dash-echo'] [data-stat=pending]")
    expect(pending.locator("dt")).to_have_text("pending")
    # Each count sits next to its tier's name, in the CLI's order.
    expect(pending.locator("dd")).to_have_text(re.compile(r"^high \d+ · normal \d+ · low \d+$"))
    expect(pending.locator("[data-tier]")).to_have_count(3)
    for tier in ("high", "normal", "low"):
        expect(pending.locator(f"[data-tier={tier}] .tier-label")).to_have_text(tier)
    # The running worker keeps the queue empty here.
    expect(pending.locator("dd")).to_have_text("high 0 · normal 0 · low 0")
