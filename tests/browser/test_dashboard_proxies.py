"""The dashboard's proxies page: a cooling proxy and a healthy one, in use counts, no
credential anywhere on the page, and a scoped token told it may not see proxies."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from fleet.backends import open_backend
from fleet.core.proxy import ProxyHandle, ProxyPolicy, proxy_key, proxy_key_salt
from tests.browser.stack import READ_TOKEN, SCOPED_TOKEN, Stack
from tests.browser.test_dashboard import Watch, browser, page, shot, sign_in, stack

__all__ = ["browser", "page", "stack"]  # the fixtures this module reuses

BAD = "http://alice:s3cret@bad.proxy.test:8001"
GOOD = "http://alice:s3cret@good.proxy.test:8002"


async def _report(url: str) -> str:
    backend = await open_backend(url)
    try:
        slot = ProxyHandle(urls=[BAD, GOOD], health=backend.proxies, policy=ProxyPolicy())
        await slot.ensure()
        await slot.report_bad(f"captcha through {BAD}")  # and holds a place on GOOD now
        return await proxy_key_salt(backend.kv)
    finally:
        await backend.close()


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)  # the page is backend-blind
def test_proxies_page_shows_health_without_credentials(
    page: tuple[Page, Watch], stack: Stack, tmp_path: Path
) -> None:
    # Playwright's sync API runs an event loop here: the backend gets a thread of its own.
    with ThreadPoolExecutor(1) as pool:
        salt = pool.submit(lambda: asyncio.run(_report(stack.backend_url))).result()
    p, _ = page
    sign_in(p, stack, "#/proxies", token=READ_TOKEN)
    expect(p.locator("#nav a[data-route=proxies]")).to_have_class("active")
    bad = p.locator(f"#proxies tr[data-proxy='{proxy_key(BAD, salt)}']")
    good = p.locator(f"#proxies tr[data-proxy='{proxy_key(GOOD, salt)}']")
    expect(bad.locator("[data-role=proxy-state]")).to_contain_text("cooling")
    expect(bad).to_contain_text("captcha through http://********@bad.proxy.test:8001")
    expect(good.locator("[data-role=proxy-state]")).to_have_text("healthy")
    expect(good.locator("td").nth(2)).to_have_text("1")  # in use
    expect(p.locator("[data-role=proxies-summary]")).to_contain_text("1 cooling down")
    shot(p, "proxies", tmp_path)
    html = p.content()
    assert "s3cret" not in html and "alice" not in html


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)
def test_a_scoped_token_may_not_see_proxies(page: tuple[Page, Watch], stack: Stack) -> None:
    p, _ = page
    sign_in(p, stack, "#/proxies", token=SCOPED_TOKEN)
    expect(p.locator("#proxies .note-error")).to_contain_text("Not allowed")
