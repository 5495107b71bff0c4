"""The dashboard's Webhooks view (a real master and worker, Chromium): the subscriptions
with their secrets masked (the secret itself nowhere on the page), and one's delivery log
with each status, attempts, last HTTP status and error (shown as text, never as HTML)."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from fleet.backends.base import Backend
from fleet.core.webhooks import Delivery
from tests.browser.stack import READ_TOKEN, Stack, on_backend
from tests.browser.test_dashboard import Watch, browser, page, shot, sign_in, stack

__all__ = ["browser", "page", "stack"]  # the fixtures this module reuses

EVIL = "<img src=x onerror=alert(1)>"


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)  # the page is backend-blind
def test_webhooks_and_their_deliveries(
    page: tuple[Page, Watch], stack: Stack, tmp_path: Path
) -> None:
    body = {
        "url": "http://127.0.0.1:9/hooks",
        "events": ["run.completed", "task.dead"],
        "types": ["dash-echo"],
    }
    made = stack.api("POST", "/webhooks", json=body)
    assert made.status_code == 201, made.text
    hook_id, secret = made.json()["id"], made.json()["secret"]
    other = stack.api(
        "POST", "/webhooks", json={"url": "http://127.0.0.1:9/in", "events": ["tier.changed"]}
    )
    assert other.status_code == 201

    async def log(backend: Backend) -> None:
        rows = [
            Delivery("evt_done", "run.completed", "delivered", 3, 200, None, 100.0, 110.0),
            Delivery("evt_dead", "task.dead", "dead", 10, 500, f"HTTP 500: {EVIL}", 200.0, 260.0),
            Delivery(
                "evt_wait",
                "run.completed",
                "failed",
                1,
                None,
                "ConnectError: refused",
                300.0,
                301.0,
            ),
        ]
        for row in rows:
            await backend.webhooks.log(hook_id, row)

    on_backend(stack, log)
    p, watch = page
    sign_in(p, stack, "#/webhooks", token=READ_TOKEN)
    expect(p.locator("#nav a[data-route=webhooks]")).to_have_class("active")
    row = p.locator(f"#webhooks tr[data-webhook='{hook_id}']")
    expect(row).to_contain_text("http://127.0.0.1:9/hooks")
    expect(row).to_contain_text("run.completed, task.dead")
    expect(row).to_contain_text("types dash-echo")
    expect(row.locator("[data-role=secret]")).to_have_text(f"whsec_********{secret[-4:]}")
    expect(p.locator("#webhooks tr[data-webhook]")).to_have_count(2)
    row.locator("a").click()
    expect(p).to_have_url(f"{stack.url}/#/webhooks/{hook_id}")
    log_rows = p.locator("#webhooks [data-role=deliveries] tr[data-event]")
    expect(log_rows).to_have_count(3)
    expect(log_rows.nth(0)).to_have_attribute("data-event", "evt_wait")  # newest first
    dead = p.locator("tr[data-event=evt_dead]")
    expect(dead.locator("[data-role=status]")).to_have_text("dead")
    expect(dead).to_contain_text(f"HTTP 500: {EVIL}")
    expect(dead.locator("td").nth(3)).to_have_text("10")
    expect(p.locator("tr[data-event=evt_done] [data-role=status]")).to_have_text("delivered")
    expect(p.locator("tr[data-event=evt_wait]")).to_contain_text("ConnectError: refused")
    routes = p.evaluate(
        """async () => {
        const { parseRoute } = await import("/js/app.js");
        return [parseRoute("#/webhooks"), parseRoute("#/webhooks/wh_a%2Fb")];
    }"""
    )
    assert routes == [{"name": "webhooks"}, {"name": "webhooks", "hook": "wh_a/b"}]
    shot(p, "webhooks", tmp_path)
    assert secret not in p.content()
    assert p.locator("#webhooks img").count() == 0 and watch.dialogs == []
