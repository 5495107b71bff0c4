"""The dashboard's config form and proxy passwords (issue 24, 2 and 3): a read token sees
every credential form masked in the form and nowhere else on the page; the admin appends
a proxy to the masked list in the same form and saves, and the backend still holds every
original password, plus the new one. A real master and worker, on SQLite and Redis."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from fleet.core.proxy import split_proxy_urls
from tests.browser.stack import READ_TOKEN, Stack
from tests.browser.test_dashboard import WAIT_MS, Watch, browser, page, sign_in, stack

__all__ = ["browser", "page", "stack"]  # the fixtures this module reuses

TYPE = "dash-echo"
FORMS = [
    "http://alice:pw-dash-1@10.9.0.1:8080",  # scheme, user and password
    "bob:pw-dash-2@127.0.0.1:3128",  # no scheme
    "http://carol:p@ss-dash-3@10.9.0.3:8080",  # @ in the password
    "http://dave:pa:ss-dash-4@10.9.0.4:8080",  # : in the password
    "http://apikey-dash-5@10.9.0.5:8080",  # a user name alone
]
SECRETS = ("pw-dash-1", "pw-dash-2", "ss-dash-3", "ss-dash-4", "apikey-dash-5")
ADDED = "http://frank:pw-dash-new@10.9.0.9:8080"


def no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, secret


@pytest.fixture
def admin_page(browser: Browser, stack: Stack) -> Iterator[tuple[Page, Watch]]:
    """A second tab, of its own browser context (its own sign-in), for the admin."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    p = context.new_page()
    p.set_default_timeout(WAIT_MS)
    watch = Watch(p)
    yield p, watch
    context.close()
    assert watch.errors == []


def test_the_config_form_masks_for_readers_and_round_trips_for_the_admin(
    page: tuple[Page, Watch], admin_page: tuple[Page, Watch], stack: Stack
) -> None:
    r = stack.api("PATCH", f"/automations/{TYPE}/config", json={"proxy_url": ",".join(FORMS)})
    assert r.status_code == 200, r.text
    try:
        # A read token: the form shows the list, every credential masked.
        reader, _ = page
        sign_in(reader, stack, f"#/automation/{TYPE}", token=READ_TOKEN)
        field = reader.locator("#cfg-proxy_url")
        expect(field).to_have_value(re.compile(r"alice:\*{8}@10\.9\.0\.1:8080"))
        shown = split_proxy_urls(field.input_value())
        assert shown == [
            "http://alice:********@10.9.0.1:8080",
            "bob:********@127.0.0.1:3128",
            "http://carol:********@10.9.0.3:8080",
            "http://dave:********@10.9.0.4:8080",
            "http://********@10.9.0.5:8080",
        ]
        no_secret(reader.content())
        reader.click("#nav a[data-route=workers]")
        expect(reader.locator(f"tr[data-worker='{stack.worker_id}']")).to_be_visible()
        no_secret(reader.content())

        # The admin appends a proxy to the masked list, in the form, and saves.
        admin, _ = admin_page
        sign_in(admin, stack, f"#/automation/{TYPE}")
        field = admin.locator("#cfg-proxy_url")
        expect(field).to_have_value(re.compile(r"\*{8}"))
        field.fill(f"{field.input_value()},{ADDED}")
        admin.click("#config-editor button[type=submit]")
        expect(admin.locator("#config-editor .note-ok")).to_contain_text("pushed to 1 worker")
        # The form reloads what was saved: masked again, the new entry included.
        expect(field).to_have_value(re.compile(r"frank:\*{8}@10\.9\.0\.9:8080$"))
        no_secret(admin.content())
        assert "pw-dash-new" not in admin.content()

        stored = stack.api("GET", f"/automations/{TYPE}/config?reveal=true").json()["config"]
        assert split_proxy_urls(stored["proxy_url"]) == [*FORMS, ADDED]
    finally:
        stack.api("PATCH", f"/automations/{TYPE}/config", json={"proxy_url": None})
