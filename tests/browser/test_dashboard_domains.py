"""A type's domains in the dashboard (docs/blocks.md#tiers), in Chromium against a real
master and worker: the Domains panel of the type's page lists each domain with its tier
by name, since when, its verdicts and the last one with its vendor, ten a page with
"more"; the type's tiers as a chain; one short line for a type without domains; and the
rows follow the stream's ``tier`` events live: a worker's verdicts that escalate a domain
(through the worker's own :class:`~fleet.core.access.router.Access`) and an operator's
PUT. On SQLite: the panel is backend-blind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect

from fleet.backends.base import Backend
from fleet.core.access.router import Access, Route
from fleet.core.blocks.verdicts import Verdict, VerdictKind
from fleet.core.config import BaseConfig
from fleet.core.tiers import TierRule
from tests.browser.stack import READ_TOKEN, Stack, on_backend, running_stack
from tests.browser.test_dashboard import Watch, browser, page, shot, sign_in

__all__ = ["browser", "page"]  # the fixtures this module reuses

TYPE = "dash-echo"
TIERS: list[dict[str, object]] = [
    {"name": "direct", "direct": True},
    {"name": "datacenter", "proxy_url": "http://127.0.0.1:9"},
    {"name": "residential", "proxy_url": "http://127.0.0.1:10"},
]
#: Three blocks at a domain's tier move it up (the stored config's default too).
RULE = TierRule(tiers=3, escalate_after=3)
#: By name: a-calm, b-shop, c-slow, then z-00 ... z-09 (13: a page of 10 and one of 3).
FIRST_PAGE = ["a-calm.test", "b-shop.test", "c-slow.test"] + [f"z-{n:02d}.test" for n in range(7)]
SECOND_PAGE = [f"z-{n:02d}.test" for n in range(7, 10)]


@pytest.fixture(scope="module", params=["sqlite"])
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    yield from running_stack(request, tmp_path_factory, "dash-domains")


def seed(stack: Stack) -> None:
    r = stack.api("PATCH", f"/automations/{TYPE}/config", {"proxy_tiers": TIERS})
    assert r.status_code == 200, r.text

    async def work(b: Backend) -> None:
        async def record(
            domain: str, kind: VerdictKind, vendor: str | None = None, n: int = 1
        ) -> None:
            await b.domains.record(
                TYPE, domain, tier=0, kind=kind, vendor=vendor, rule=RULE, count=n
            )

        await record("a-calm.test", "ok", n=5)
        for _ in range(3):
            await record("b-shop.test", "blocked", "akamai")
        await record("c-slow.test", "throttled", n=2)
        await record("c-slow.test", "captcha", "hcaptcha")
        for n in range(10):
            await record(f"z-{n:02d}.test", "ok")

    on_backend(stack, work)


def escalate(stack: Stack, domain: str, tier: int, vendor: str) -> None:
    """Three challenges met at ``tier`` by a worker's Access: the domain moves up, and
    the worker's code publishes the tier event."""

    config = BaseConfig.model_validate({"proxy_tiers": TIERS})

    async def work(b: Backend) -> None:
        access = Access(b, TYPE, lambda: config)
        route = Route(tier, config.proxy_tiers[tier].name)
        moved = None
        for _ in range(3):
            moved = await access.note(domain, route, Verdict(kind="challenge", vendor=vendor))
        assert moved is not None and moved.change == "up", moved

    on_backend(stack, work)


def row(p: Page, domain: str) -> Locator:
    return p.locator(f"#domains tr[data-domain='{domain}']")


def col(p: Page, domain: str, name: str) -> Locator:
    return row(p, domain).locator(f"[data-col={name}]")


def test_the_domains_panel_lists_pages_and_follows_tier_events(
    page: tuple[Page, Watch], stack: Stack, tmp_path: Path
) -> None:
    p, _ = page
    # A type without domains: one short line, the panel stays small.
    sign_in(p, stack, f"#/automation/{TYPE}", token=READ_TOKEN)
    expect(p.locator("#domains .empty")).to_have_text("No verdict met yet.")
    expect(p.locator("#domains [data-role=tiers]")).to_have_text("Tiers: no proxy_tiers")
    expect(p.locator("#domains table")).to_have_count(0)
    box = p.locator("#domains").bounding_box()
    assert box is not None and box["height"] < 110, box

    seed(stack)
    p.reload()
    expect(p.locator("#domains [data-role=tiers]")).to_have_text(
        "Tiers: direct → datacenter → residential"
    )
    rows = p.locator("#domains tbody tr")
    expect(rows).to_have_count(10)
    assert [r.get_attribute("data-domain") for r in rows.all()] == FIRST_PAGE
    expect(col(p, "a-calm.test", "tier")).to_have_text("direct")
    expect(col(p, "a-calm.test", "tier").locator(".badge")).to_have_class("badge tier-first")
    expect(col(p, "a-calm.test", "ok")).to_have_text("5")
    expect(col(p, "a-calm.test", "since")).to_contain_text("ago")
    expect(col(p, "a-calm.test", "last")).to_have_text("ok")
    expect(col(p, "b-shop.test", "tier")).to_have_text("datacenter")
    expect(col(p, "b-shop.test", "tier").locator(".badge")).to_have_class("badge tier-mid")
    expect(col(p, "b-shop.test", "blocked")).to_have_text("3")
    expect(col(p, "b-shop.test", "ok")).to_have_text("0")
    expect(col(p, "b-shop.test", "last")).to_have_text("blocked (akamai)")
    expect(col(p, "c-slow.test", "captcha")).to_have_text("1")
    expect(col(p, "c-slow.test", "throttled")).to_have_text("2")
    expect(col(p, "c-slow.test", "challenge")).to_have_text("0")
    expect(col(p, "c-slow.test", "last")).to_have_text("captcha (hcaptcha)")
    # Compact: ten rows take less than a screenful.
    box = p.locator("#domains").bounding_box()
    assert box is not None and box["height"] < 480, box

    # "more": the next page; "first": back.
    expect(p.locator("#domains [data-action=first]")).to_have_count(0)
    p.click("#domains [data-action=more]")
    expect(rows).to_have_count(3)
    assert [r.get_attribute("data-domain") for r in rows.all()] == SECOND_PAGE
    expect(p.locator("#domains [data-action=more]")).to_have_count(0)
    p.click("#domains [data-action=first]")
    expect(rows).to_have_count(10)
    expect(rows.first).to_have_attribute("data-domain", "a-calm.test")

    # Live: the stream's tier events reach the store and the panel re-reads at once (it
    # polls only every 10 s), the row that moved marked.
    p.evaluate(
        """async () => {
        const { store } = await import("/js/store.js");
        window.tierEvents = [];
        store.addEventListener("tier", (ev) => window.tierEvents.push(ev.detail));
    }"""
    )
    escalate(stack, "b-shop.test", 1, "cloudflare")  # a worker's verdicts: up to the top
    expect(row(p, "b-shop.test")).to_have_attribute("data-tier", "residential", timeout=2500)
    expect(row(p, "b-shop.test")).to_have_class("moved")
    expect(col(p, "b-shop.test", "tier").locator(".badge")).to_have_class("badge tier-top")
    expect(col(p, "b-shop.test", "challenge")).to_have_text("3")
    expect(col(p, "b-shop.test", "last")).to_have_text("challenge (cloudflare)")
    expect(row(p, "a-calm.test")).not_to_have_class("moved")

    r = stack.api("PUT", f"/automations/{TYPE}/domains/a-calm.test", {"tier": "datacenter"})
    assert r.status_code == 200, r.text  # an operator's choice
    expect(row(p, "a-calm.test")).to_have_attribute("data-tier", "datacenter", timeout=2500)
    expect(row(p, "a-calm.test")).to_have_class("moved")
    got = p.evaluate("window.tierEvents")
    assert [(e["type"], e["domain"], e["tier"], e["change"]) for e in got] == [
        (TYPE, "b-shop.test", "residential", "up"),
        (TYPE, "a-calm.test", "datacenter", "set"),
    ]
    shot(p, "domains", tmp_path)

    # A page in the middle follows its events too.
    p.click("#domains [data-action=more]")
    expect(rows).to_have_count(3)
    r = stack.api("PUT", f"/automations/{TYPE}/domains/z-08.test", {"tier": 2})
    assert r.status_code == 200, r.text
    expect(row(p, "z-08.test")).to_have_attribute("data-tier", "residential", timeout=2500)
    expect(rows).to_have_count(3)
    # The panel's events stop with the page: another view draws no domain.
    p.goto(f"{stack.url}/#/workers")
    r = stack.api("PUT", f"/automations/{TYPE}/domains/z-08.test", {"tier": 0})
    assert r.status_code == 200, r.text
    expect(p.locator("#domains")).to_have_count(0)


def test_the_panel_says_why_it_cannot_list(page: tuple[Page, Watch], stack: Stack) -> None:
    """Whatever the master answers, the page stays whole: an unknown type shows its
    error and no Domains panel."""
    p, _ = page
    sign_in(p, stack, "#/automation/no-such-type")
    expect(p.locator("#automation .note-error")).to_contain_text("Unknown automation no-such-type")
    expect(p.locator("#domains")).to_have_count(0)
