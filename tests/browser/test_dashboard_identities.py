"""The dashboard's identities view (issue 43, item 6) in Chromium against a real master:
the pools with their counts by state, a pool's table (every secret masked), paging with
after/next, Retire and Revive for the admin token, no buttons for a read token, and the
view reloading on the event stream's ``identity`` events."""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect

from fleet.backends import open_backend
from fleet.core.identities import parse_identity
from tests.browser.stack import READ_TOKEN, Stack
from tests.browser.test_dashboard import Watch, browser, page, shot, sign_in, stack

__all__ = ["browser", "page", "stack"]  # the fixtures this module reuses

POOL = "dash-ids"
BIG = "dash-big"
SECRETS = ("pw-ident-1", "pw-ident-2", "ck-ident-3")


def identity(name: str, n: int) -> dict[str, object]:
    return {
        "id": name,
        "proxy": f"http://user{n}:pw-ident-1@10.0.0.{n}:8080",
        "fingerprint": {"user_agent": f"Mozilla/5.0 Agent/{n}", "locale": "en-US"},
        "cookies": [{"name": "sid", "value": "ck-ident-3", "domain": "site.test"}],
    }


async def _seed(url: str) -> None:
    """id-a leased, id-b cooling (blocked), id-c retired, id-d ready; 60 in BIG."""
    backend = await open_backend(url)
    try:
        ids = backend.identities
        await ids.put(POOL, [parse_identity(identity(f"id-{c}", n)) for n, c in enumerate("abcd")])
        await ids.put(BIG, [parse_identity({"id": f"big-{n:02d}"}) for n in range(60)])
        held = await ids.lease(POOL, lease_seconds=600)
        blocked = await ids.lease(POOL, lease_seconds=600)
        assert held is not None and blocked is not None
        assert (held.identity.id, blocked.identity.id) == ("id-a", "id-b")
        reason = "captcha through http://bob:pw-ident-2@10.0.0.2:8080"
        await ids.release(
            POOL, "id-b", blocked.token, outcome="blocked", reason=reason, cooldown_seconds=600
        )
        await ids.retire(POOL, "id-c", "banned")
    finally:
        await backend.close()


def seed(stack: Stack) -> None:
    # Playwright's sync API runs an event loop here: the backend gets a thread of its own.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(lambda: asyncio.run(_seed(stack.backend_url))).result()


def no_secret(p: Page) -> None:
    html = p.content()
    for secret in SECRETS:
        assert secret not in html, secret


def counts_of(p: Page) -> dict[str, str]:
    stats = p.locator("#identity-pool [data-role=identity-counts] .stat")
    expect(stats).to_have_count(4)
    return {str(s.get_attribute("data-stat")): s.locator("dd").inner_text() for s in stats.all()}


def row(p: Page, identity_id: str) -> Locator:
    return p.locator(f"#identity-pool tr[data-identity='{identity_id}']")


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)  # the page is backend-blind
def test_identities_view(page: tuple[Page, Watch], stack: Stack) -> None:
    seed(stack)
    p, watch = page

    # A read token: the pools with their counts by state.
    sign_in(p, stack, "#/identities", token=READ_TOKEN)
    expect(p.locator("#nav a[data-route=identities]")).to_have_class("active")
    pool_row = p.locator(f"#identities tr[data-pool='{POOL}']")
    expect(pool_row.locator("[data-col=total]")).to_have_text("4")
    for state in ("ready", "leased", "cooling", "retired"):
        expect(pool_row.locator(f"[data-col={state}]")).to_have_text("1")
    expect(p.locator(f"#identities tr[data-pool='{BIG}'] [data-col=ready]")).to_have_text("60")

    # Its page: counts, the table with its stats, every secret masked, no buttons.
    pool_row.locator("a").click()
    expect(p.locator("#identity-pool")).to_have_attribute("data-pool", POOL)
    expect(p.locator("#identity-pool tbody tr")).to_have_count(4)
    assert counts_of(p) == {"ready": "1", "leased": "1", "cooling": "1", "retired": "1"}
    a, b, c = row(p, "id-a"), row(p, "id-b"), row(p, "id-c")
    expect(a.locator("[data-role=state]")).to_have_text("leased")
    expect(a.locator("[data-col=proxy]")).to_have_text("http://user0:********@10.0.0.0:8080")
    expect(a.locator("[data-col=user-agent]")).to_have_text("Mozilla/5.0 Agent/0")
    expect(a.locator("[data-col=leases]")).to_have_text("1")
    expect(b.locator("[data-role=state]")).to_have_text("cooling")
    expect(b.locator("[data-col=blocked]")).to_have_text("1")
    expect(b.locator("[data-col=blocked-in-row]")).to_have_text("1")
    expect(b.locator("[data-col=last-reason]")).to_have_text(
        "captcha through http://********@10.0.0.2:8080"
    )
    expect(b.locator("[data-col=cooling]")).to_contain_text(re.compile(r"^in (9|10) m"))
    expect(b.locator("[data-col=last-used]")).to_contain_text("ago")
    expect(c.locator("[data-role=state]")).to_have_text("retired")
    expect(c.locator("[data-col=last-reason]")).to_have_text("banned")
    expect(p.locator("#identity-pool button[data-action]")).to_have_count(0)
    no_secret(p)

    # The next page of 60 identities, and back.
    p.goto(f"{stack.url}/#/identities/{BIG}")
    rows = p.locator("#identity-pool tbody tr")
    expect(rows).to_have_count(50)
    expect(rows.first).to_have_attribute("data-identity", "big-00")
    expect(p.locator("#identity-pool [data-action=previous]")).to_have_count(0)
    p.click("#identity-pool [data-action=next]")
    expect(rows).to_have_count(10)
    expect(rows.first).to_have_attribute("data-identity", "big-50")
    expect(p.locator("#identity-pool [data-action=next]")).to_have_count(0)
    p.click("#identity-pool [data-action=previous]")
    expect(rows).to_have_count(50)
    expect(rows.last).to_have_attribute("data-identity", "big-49")
    expect(p.locator("#identity-pool [data-action=previous]")).to_have_count(0)
    assert watch.dialogs == []

    # A pool that holds no identity: the master's 404, with the pool it may have meant.
    p.goto(f"{stack.url}/#/identities/dash-idz")
    expect(p.locator("#identity-pool .note-error")).to_contain_text(
        "unknown identity pool 'dash-idz'"
    )
    expect(p.locator("#identity-pool .note-error")).to_contain_text("dash-ids")
    routes = p.evaluate(
        """async () => {
        const { parseRoute } = await import("/js/app.js");
        return ["#/identities", "#/identities/a.b%2Fc", "#/identities/"].map(parseRoute);
    }"""
    )
    assert routes == [
        {"name": "identities"},
        {"name": "identities", "pool": "a.b/c"},
        {"name": "identities"},
    ]


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)
def test_the_admin_retires_and_revives_and_events_reload_the_view(
    page: tuple[Page, Watch], stack: Stack, tmp_path: Path
) -> None:
    if stack.api("GET", f"/identities/{POOL}").status_code == 404:
        seed(stack)
    p, watch = page
    sign_in(p, stack, f"#/identities/{POOL}")
    expect(row(p, "id-d").locator("[data-role=state]")).to_have_text("ready")
    before = counts_of(p)

    # Retire id-d (after a confirm): the row and the counts follow, the backend agrees.
    row(p, "id-d").locator("[data-action=retire]").click()
    expect(row(p, "id-d")).to_have_attribute("data-state", "retired")
    expect(p.locator("#identity-pool .note-ok")).to_contain_text("Retire id-d: done.")
    assert watch.dialogs and "Retire identity id-d" in watch.dialogs[-1]
    assert stack.api("GET", f"/identities/{POOL}/id-d").json()["state"] == "retired"
    expect(row(p, "id-d").locator("[data-action=retire]")).to_have_count(0)
    assert int(counts_of(p)["retired"]) == int(before["retired"]) + 1

    # Revive it (no confirm): ready again.
    dialogs = len(watch.dialogs)
    row(p, "id-d").locator("[data-action=revive]").click()
    expect(row(p, "id-d")).to_have_attribute("data-state", "ready")
    assert len(watch.dialogs) == dialogs
    assert stack.api("GET", f"/identities/{POOL}/id-d").json()["state"] == "ready"
    # A cooling identity may be revived too; a ready one only retired.
    expect(row(p, "id-b").locator("[data-action=revive]")).to_have_count(1)
    expect(row(p, "id-d").locator("[data-action=revive]")).to_have_count(0)
    shot(p, "identities", tmp_path)

    # Another client retires and revives: the stream's identity events reach the store,
    # and the view reloads at once (it polls only every 5 s).
    p.evaluate(
        """async () => {
        const { store } = await import("/js/store.js");
        window.identityEvents = [];
        store.addEventListener("identity", (ev) => window.identityEvents.push(ev.detail));
    }"""
    )
    for action, state in (("retire", "retired"), ("revive", "ready"), ("retire", "retired")):
        r = stack.api("POST", f"/identities/{POOL}/id-d/{action}")
        assert r.status_code == 200, r.text
        expect(row(p, "id-d")).to_have_attribute("data-state", state, timeout=2500)
    got = p.evaluate("window.identityEvents")
    assert [(e["pool"], e["id"], e["event"]) for e in got] == [
        (POOL, "id-d", "retired"),
        (POOL, "id-d", "revived"),
        (POOL, "id-d", "retired"),
    ]
    no_secret(p)
