"""Error groups by a real fleet, viewed in Chromium (issue 47, "Done means"): a master
and a ``fleet worker`` process on SQLite and Redis, a local site. 300 tasks of
``err-http`` fetch 300 different pages with ``ctx.http()`` and fail with the page's URL in
the message: exactly one error group, count 300 (one failed attempt each:
``max_attempts`` 1), with the page's HTML as a snapshot. Tasks of ``err-render`` fail
holding a Chromium tab: their group keeps the page's HTML and a screenshot, taken before
the tab closed. The dashboard shows both groups: the screenshot as an image and the HTML
in a sandboxed frame where its script does not run."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.stack import READ_TOKEN, Stack
from tests.browser.test_dashboard import Watch, browser, page, sign_in
from tests.support.sites import QuietHandler, serving

__all__ = ["browser", "page"]  # the fixtures this module reuses

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(240)]

HTTP, RENDER = "err-http", "err-render"
TASKS = 300
RENDERED = 4


class Shop(QuietHandler):
    """Item pages without a price; a script that would add a line if it ran."""

    def do_GET(self) -> None:
        n = self.path.split("/")[-1].split("?")[0]
        html = (
            f"<html><head><title>Item {n}</title></head><body>"
            f'<h1 id="title">Item {n}</h1><p class="name">A thing</p>'
            "<script>document.body.insertAdjacentHTML('beforeend', '<p id=\"ran\">ran</p>')"
            "</script></body></html>"
        )
        self.answer(200, html.encode(), {"content-type": "text/html; charset=utf-8"})


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    with serving(Shop) as url:
        yield url


@pytest.fixture(scope="module", params=["sqlite", "redis"])
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    logs = tmp_path_factory.mktemp(f"errors-{request.param}")
    if request.param == "sqlite":
        url = f"sqlite:///{logs / 'fleet.db'}"
    else:
        import redis

        url = request.getfixturevalue("redis_server").url
        client = redis.Redis.from_url(url)
        client.flushall()
        client.close()
    s = Stack(backend_url=url, logs=logs, plugin="tests.browser.errors_plugin")
    try:
        s.start()
        yield s
    finally:
        s.stop()


def groups(stack: Stack, automation_type: str) -> list[dict[str, Any]]:
    r = stack.api("GET", f"/automations/{automation_type}/errors?limit=50")
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()["items"]
    return items


def one_group_of(stack: Stack, automation_type: str, count: int) -> dict[str, Any]:
    """The type's only group once it counts ``count`` failures (and holds a snapshot)."""
    found: dict[str, Any] = {}

    def done() -> bool:
        got = groups(stack, automation_type)
        if not got or got[0]["count"] < count:
            return False
        r = stack.api("GET", f"/automations/{automation_type}/errors/{got[0]['group']}")
        found.update(r.json())
        return bool(found.get("snapshots"))

    stack.wait_for(done, 90, f"{count} failures of {automation_type} in a group with a snapshot")
    assert len(groups(stack, automation_type)) == 1
    return found


def submit(stack: Stack, automation_type: str, urls: list[str]) -> None:
    r = stack.api("PATCH", f"/automations/{automation_type}/config", {"slots": 4})
    assert r.status_code == 200, r.text
    tasks = [{"payload": {"url": u}, "max_attempts": 1} for u in urls]
    r = stack.api("POST", f"/automations/{automation_type}/tasks/batch", {"tasks": tasks})
    assert r.status_code == 202, r.text


def body(stack: Stack, automation_type: str, group: str, snap: str, part: str) -> httpx.Response:
    path = f"/automations/{automation_type}/errors/{group}/snapshots/{snap}/{part}"
    return stack.api("GET", path)


def test_three_hundred_urls_one_group_with_snapshots(
    stack: Stack, site: str, page: tuple[Page, Watch]
) -> None:
    submit(stack, HTTP, [f"{site}item/{i}?ref={uuid.uuid4().hex}" for i in range(TASKS)])
    g = one_group_of(stack, HTTP, TASKS)
    assert g["count"] == TASKS  # every task failed once, none twice
    assert g["exception"] == "tests.browser.errors_plugin.PriceMissing"
    assert g["message"] == "no price on <url> (HTTP <n>)"
    assert g["location"] == "errors_plugin.py:run_one"
    assert g["domains"] == ["127.0.0.1"]
    assert "PriceMissing" in g["traceback"] and site in g["sample_message"]
    assert 1 <= len(g["snapshots"]) <= 3  # a storm of 300 takes at most 3 per process
    snap = g["snapshots"][0]
    assert snap["html_bytes"] > 0 and snap["png_bytes"] == 0 and snap["url"].startswith(site)
    html = body(stack, HTTP, g["group"], snap["id"], "html")
    assert html.status_code == 200 and 'id="title">Item ' in html.text
    assert html.headers["content-security-policy"].startswith("sandbox")

    submit(stack, RENDER, [f"{site}item/r{i}" for i in range(RENDERED)])
    r = one_group_of(stack, RENDER, RENDERED)
    assert r["count"] == RENDERED and r["message"] == "no price rendered on <url>"
    shot = next(s for s in r["snapshots"] if s["png_bytes"])
    png = body(stack, RENDER, r["group"], shot["id"], "screenshot")
    assert png.status_code == 200 and png.content.startswith(b"\x89PNG")
    rendered = body(stack, RENDER, r["group"], shot["id"], "html").text
    assert 'id="ran"' in rendered  # the page as the browser ran it

    # The dashboard, with a read token: the type's Errors panel, then the group's page.
    p, _ = page
    sign_in(p, stack, f"#/automation/{RENDER}", token=READ_TOKEN)
    row = p.locator(f'#errors tr[data-group="{r["group"]}"]')
    expect(row.locator('[data-col="count"]')).to_have_text(str(RENDERED))
    row.locator("a").click()
    expect(p.locator("#error-group [data-role=count]")).to_have_text(str(RENDERED))
    img = p.locator(f'[data-snapshot="{shot["id"]}"] img[data-role=snapshot-shot]')
    expect(img).to_be_visible()
    assert img.evaluate("i => i.complete && i.naturalWidth > 0")
    frame = p.locator(f'[data-snapshot="{shot["id"]}"] iframe[data-role=snapshot-html]')
    assert frame.get_attribute("sandbox") == ""
    title = "Item " + shot["url"].rsplit("/", 1)[-1]
    expect(frame.content_frame.locator("#title")).to_have_text(title)

    # The ctx.http() group's HTML is the served page: its script never runs in the frame.
    p.goto(f"{stack.url}/#/errors/{HTTP}/{g['group']}")
    expect(p.locator("#error-group [data-role=count]")).to_have_text(str(TASKS))
    frame = p.locator(f'[data-snapshot="{snap["id"]}"] iframe[data-role=snapshot-html]')
    inner = frame.content_frame
    expect(inner.locator("#title")).to_contain_text("Item ")
    p.wait_for_timeout(300)
    assert inner.locator("#ran").count() == 0
    expect(p.locator("#error-group [data-role=traceback]")).to_contain_text("PriceMissing")
