"""The dashboard in Debian's headless Chromium against a real master and worker.

One master and one worker run per backend (SQLite, then Redis); one browser is
shared by the module and every test gets a fresh context (an empty session
storage, so a fresh sign-in).
"""

from __future__ import annotations

import functools
import os
import re
import threading
import uuid
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Route, expect, sync_playwright

from tests.browser.stack import (
    ADMIN_TOKEN,
    CHROMIUM,
    CHROMIUM_ARGS,
    READ_TOKEN,
    REPO,
    SCOPED_TOKEN,
    Stack,
    running_stack,
)
from tests.support.redis_server import require_redis

pytestmark = pytest.mark.browser

WAIT_MS = 15_000
expect.set_options(timeout=WAIT_MS)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One Chromium for the whole module."""
    if not os.path.exists(CHROMIUM):
        if require_redis():  # strict (CI) mode: .ci/run installs Chromium
            pytest.fail("Debian's chromium is required but not installed")
        pytest.skip("chromium not installed (apt-get install chromium)")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module", params=["sqlite", "redis"])
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """A master and a worker on a fresh backend of each kind."""
    yield from running_stack(request, tmp_path_factory, "dash")


class Watch:
    """What a page did that a test may want to deny: dialogs and script errors."""

    def __init__(self, page: Page) -> None:
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        page.on("dialog", self._dialog)
        page.on("pageerror", lambda err: self.errors.append(str(err)))

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        if dialog.type == "confirm":
            dialog.accept()
        else:
            dialog.dismiss()


@pytest.fixture
def page(browser: Browser, stack: Stack) -> Iterator[tuple[Page, Watch]]:
    """A fresh tab at 1280 px; fails the test if the page threw a script error."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    p = context.new_page()
    p.set_default_timeout(WAIT_MS)
    watch = Watch(p)
    yield p, watch
    context.close()
    assert watch.errors == []


def sign_in(page: Page, stack: Stack, route: str = "", token: str = ADMIN_TOKEN) -> None:
    page.goto(f"{stack.url}/{route}")
    page.fill("#token", token)
    page.click("#signin button[type=submit]")
    expect(page.locator("#nav")).to_be_visible()


def shot(page: Page, name: str, tmp: Path) -> Path:
    """A full-page screenshot (docs/screenshots come from take_screenshots.py)."""
    path = tmp / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 1000
    return path


def open_automation(page: Page, stack: Stack) -> None:
    sign_in(page, stack, "#/automation/dash-echo")
    expect(page.locator("#submit form")).to_be_visible()
    expect(page.locator("#cfg-slots")).to_be_visible()


def submit_task(
    page: Page, text: str, *, fail_first: bool = False, max_attempts: int | None = None
) -> str:
    """Fill and send the submit form; returns the task id the page reports."""
    page.fill("#task-text", text)
    page.set_checked("#task-fail_first", fail_first)
    if max_attempts is not None:
        page.locator("#submit details.options").evaluate("d => { d.open = true; }")
        page.fill("#opt-max_attempts", str(max_attempts))
    page.click("#submit button[type=submit]")
    done = page.locator("#submit .note-ok")
    expect(done).to_contain_text("queued")
    match = re.search(r"Task (\S+) queued", done.inner_text())
    assert match is not None
    return match.group(1)


def expect_in_tail(page: Page, stack: Stack, text: str, task_id: str) -> None:
    """Wait for ``text`` in the output tail; on timeout say where it got stuck."""
    try:
        expect(page.locator("#tail li pre", has_text=text)).to_be_visible()
    except AssertionError as exc:
        state = stack.api("GET", f"/automations/dash-echo/tasks/{task_id}").json()
        stored = text in stack.api("GET", "/automations/dash-echo/output?n=1000").text
        live = page.locator("#live").inner_text()
        raise AssertionError(
            f"{text!r} not in the tail: task {state}, in the stored stream: {stored}, "
            f"event stream: {live}\n{stack.log_tail()}"
        ) from exc


def test_sign_in_keeps_the_token_out_of_page_and_url(
    page: tuple[Page, Watch], stack: Stack
) -> None:
    p, _ = page
    p.goto(stack.url)
    p.fill("#token", "not-a-token")
    p.click("#signin button[type=submit]")
    expect(p.locator("#signin .note-error")).to_contain_text("not known")
    expect(p.locator("#nav")).to_be_hidden()

    sign_in(p, stack)
    assert ADMIN_TOKEN not in p.url
    assert ADMIN_TOKEN not in p.content()
    assert p.evaluate("sessionStorage.getItem('fleet.token')") == ADMIN_TOKEN
    expect(p.locator("#live")).to_have_text("live")

    # A stored token the master does not accept (revoked) sends the tab back to
    # sign-in with a message, and is forgotten.
    tab = p.context.new_page()
    tab.add_init_script("sessionStorage.setItem('fleet.token', 'revoked-token')")
    tab.goto(stack.url)
    expect(tab.locator("#signin .note-error")).to_contain_text("refused")
    assert tab.evaluate("sessionStorage.getItem('fleet.token')") is None


def test_overview_and_workers_show_the_live_worker(
    page: tuple[Page, Watch], stack: Stack, tmp_path: Path
) -> None:
    p, _ = page
    sign_in(p, stack)
    card = p.locator(".type-card[data-type='dash-echo']")
    expect(card.locator("[data-stat=workers] dd")).to_have_text("1 / 1")
    expect(card.locator("svg.spark")).to_have_count(3)
    shot(p, "overview", tmp_path)

    p.click("#nav a[data-route=workers]")
    row = p.locator(f"tr[data-worker='{stack.worker_id}']")
    expect(row.locator("[data-col=state]")).to_have_text(re.compile("RUNNING|IDLE"))
    expect(p.locator(f"tbody[data-process='{stack.worker_id}']")).to_contain_text("CPU")
    shot(p, "workers", tmp_path)

    # Drain, then resume, from the table: the worker reports it within a heartbeat or two.
    row.get_by_role("button", name="Drain").click()
    expect(row.locator("[data-col=state]")).to_have_text(re.compile("DRAINING|IDLE"))
    row.get_by_role("button", name="Resume").click()
    expect(row.get_by_role("button", name="Drain")).to_be_visible()
    expect(row.locator("[data-col=state]")).to_have_text("RUNNING")


def test_submitted_html_payload_arrives_in_the_tail_as_text(
    page: tuple[Page, Watch], stack: Stack
) -> None:
    p, watch = page
    open_automation(p, stack)
    text = f"<img src=x onerror=alert(1)> {uuid.uuid4().hex[:8]}"
    task_id = submit_task(p, text)
    expect_in_tail(p, stack, text, task_id)
    expect(p.locator("#submit [data-role=task-state]")).to_contain_text(f"{task_id}: done")
    entry = p.locator("#tail li pre", has_text=text)
    assert f'"text": "echo: {text}"' in entry.inner_text()
    assert p.locator("#tail img").count() == 0
    assert p.locator("img[src=x]").count() == 0
    assert watch.dialogs == []


def test_failing_task_lands_in_the_dlq_and_replays(
    page: tuple[Page, Watch], stack: Stack, tmp_path: Path
) -> None:
    p, watch = page
    open_automation(p, stack)
    text = f"flaky-{uuid.uuid4().hex[:8]}"
    task_id = submit_task(p, text, fail_first=True, max_attempts=1)
    # Dead tasks are listed in the task browser's dead tab (the only list of them).
    p.click("#tasks [data-state=dead]")
    dead_row = p.locator(f"#tasks tr[data-task='{task_id}']")
    expect(dead_row).to_contain_text("first attempt fails")
    expect(dead_row.locator("[data-col=attempt]")).to_have_text("1")
    expect(p.locator("#submit [data-role=task-state]")).to_contain_text(f"{task_id}: dead")
    shot(p, "dlq", tmp_path)

    dead_row.locator("input[name=task-pick]").check()
    p.click("#tasks [data-action=replay-picked]")
    expect(p.locator("#tasks .note-ok")).to_contain_text("1 replayed")
    expect(dead_row).to_have_count(0)
    expect_in_tail(p, stack, f"echo: {text}", task_id)
    assert stack.api("GET", f"/automations/dash-echo/tasks/{task_id}").json()["state"] == "done"

    # Drain asks first (the watcher accepts the confirm) and empties the DLQ.
    submit_task(p, f"doomed-{uuid.uuid4().hex[:8]}", fail_first=True, max_attempts=1)
    expect(p.locator("#tasks tr[data-task]")).to_have_count(1)
    p.click("#tasks [data-action=drain]")
    assert any("cannot be undone" in d for d in watch.dialogs)
    expect(p.locator("#tasks .empty")).to_have_text("No dead task.")


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)  # the page's logic is backend-blind
def test_output_emitted_before_the_event_stream_is_live_reaches_the_tail(
    page: tuple[Page, Watch], stack: Stack
) -> None:
    # The tail is read once when the view opens, then follows emit events; an
    # emit made before the master subscribed for this page (a slow stream
    # start, a reconnect) is no event, so the page re-reads the tail once the
    # stream says hello.
    p, _ = page
    held: list[Route] = []
    p.route("**/api/v1/events*", lambda route: held.append(route))  # the stream waits here
    open_automation(p, stack)
    expect(p.locator("#live")).to_have_text("connecting…")
    text = f"early-{uuid.uuid4().hex[:8]}"
    task_id = submit_task(p, text)
    stack.wait_for(
        lambda: (
            stack.api("GET", f"/automations/dash-echo/tasks/{task_id}").json()["state"] == "done"
        ),
        30,
        "the task to be done",
    )
    for _ in range(300):  # route handlers run while Playwright is called
        if held:
            break
        p.wait_for_timeout(50)
    assert len(held) == 1
    expect(p.locator("#tail li pre", has_text=text)).to_have_count(0)
    held[0].continue_()
    expect_in_tail(p, stack, text, task_id)
    expect(p.locator("#live")).to_have_text("live")


def test_config_editor_pushes_slots_and_shows_422_at_the_field(
    page: tuple[Page, Watch], stack: Stack, tmp_path: Path
) -> None:
    p, _ = page
    open_automation(p, stack)
    before = stack.api("GET", f"/automations/dash-echo/workers/{stack.worker_id}").json()

    # A value the Config schema refuses: the master's 422 is shown at that field.
    p.fill("#cfg-visibility_seconds", "5")
    p.click("#config-editor button[type=submit]")
    err = p.locator("#config-editor [data-error-for=visibility_seconds]")
    expect(err).to_be_visible()
    expect(err).to_contain_text("10")
    expect(p.locator("#cfg-visibility_seconds")).to_have_attribute("aria-invalid", "true")
    p.fill("#cfg-visibility_seconds", "300")

    # A missing required payload field is put at the field of the submit form too.
    p.click("#submit button[type=submit]")
    expect(p.locator("#submit [data-error-for=text]")).to_contain_text(re.compile("required", re.I))

    p.fill("#cfg-slots", "3")
    p.click("#config-editor button[type=submit]")
    expect(p.locator("#config-editor .note-ok")).to_contain_text("pushed to 1 worker")
    saved = re.search(r"generation (\d+)", p.locator("#config-editor .note-ok").inner_text())
    assert saved is not None
    pushed = int(saved.group(1))
    assert pushed > before["gen"]["desired"]
    push_row = p.locator(f"#config-editor .push tr[data-worker='{stack.worker_id}']")
    expect(push_row).to_contain_text("applied")
    expect(push_row.locator("[data-col=applied]")).to_have_text(str(pushed))
    expect(
        p.locator(f"#automation tr[data-worker='{stack.worker_id}'] [data-col=slots]")
    ).to_have_text(re.compile(r"/ 3$"))
    shot(p, "automation", tmp_path)
    stack.api("PATCH", "/automations/dash-echo/config", json={"slots": 1})


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)  # layout is backend-blind
def test_reads_at_phone_width(browser: Browser, stack: Stack, tmp_path: Path) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844})
    p = context.new_page()
    p.set_default_timeout(WAIT_MS)
    try:
        sign_in(p, stack, "#/automation/dash-echo")
        expect(p.locator("#cfg-slots")).to_be_visible()
        assert p.evaluate("document.documentElement.scrollWidth") <= 390
        shot(p, "phone", tmp_path)
        p.click("#nav a[data-route=workers]")
        expect(p.locator(f"tr[data-worker='{stack.worker_id}']")).to_be_visible()
        assert p.evaluate("document.documentElement.scrollWidth") <= 390
    finally:
        context.close()


def test_a_new_worker_appears_live_then_is_forgotten(
    page: tuple[Page, Watch], stack: Stack
) -> None:
    p, watch = page
    sign_in(p, stack, "#/workers")
    expect(p.locator(f"tr[data-worker='{stack.worker_id}']")).to_be_visible()
    extra = f"dash-worker-{uuid.uuid4().hex[:6]}"
    proc = stack.spawn_worker(extra)
    row = p.locator(f"tr[data-worker='{extra}']")
    try:
        expect(row.locator("[data-col=state]")).to_have_text(re.compile("RUNNING|IDLE"))
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        stack.procs.remove(proc)  # stopped on purpose: not a process that died on us
    expect(row.locator("[data-col=state]")).to_have_text(re.compile("STOPPED|DOWN"))
    p.locator(f"tbody[data-process='{extra}']").get_by_role("button", name="Forget").click()
    assert any(extra in d for d in watch.dialogs)
    expect(row).to_have_count(0)
    expect(p.locator(f"tr[data-worker='{stack.worker_id}']")).to_be_visible()


def test_pools_show_items_to_admin_only(browser: Browser, stack: Stack) -> None:
    text = f"pooled-{uuid.uuid4().hex[:8]}"
    res = stack.api("POST", "/automations/dash-echo/tasks", json={"payload": {"text": text}})
    assert res.status_code == 202, res.text
    stack.wait_for(
        lambda: (
            stack.api("GET", f"/automations/dash-echo/tasks/{res.json()['task_id']}").json()[
                "state"
            ]
            == "done"
        ),
        20,
        "the pooled echo task",
    )
    for token, sees_payload in ((ADMIN_TOKEN, True), (READ_TOKEN, False)):
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        p = context.new_page()
        p.set_default_timeout(WAIT_MS)
        try:
            sign_in(p, stack, "#/pools", token=token)
            row = p.locator("#pools tr[data-pool='dash-echoes']")
            expect(row).to_be_visible()
            size = int(row.locator("td").nth(1).inner_text())
            assert size >= 1
            row.get_by_role("button", name="dash-echoes").click()
            items = p.locator("[data-role=pool-items] tr[data-item]")
            expect(items.first).to_be_visible()
            if sees_payload:
                expect(p.locator("[data-role=pool-items]")).to_contain_text(f"echo: {text}")
            else:
                expect(items.first).to_contain_text("admin only")
                expect(p.locator("[data-role=pool-items]")).not_to_contain_text("echo:")
                # An admin action with a read token is refused with a clear message.
                p.click("#nav a[data-route=workers]")
                p.locator(f"tr[data-worker='{stack.worker_id}']").get_by_role(
                    "button", name="Drain"
                ).click()
                expect(p.locator("#workers .note-error")).to_contain_text("admin token")
        finally:
            context.close()


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)  # tokens are backend-blind
def test_scoped_token_submits_and_polls_but_may_not_configure(
    page: tuple[Page, Watch], stack: Stack
) -> None:
    p, _ = page
    sign_in(p, stack, "#/automation/dash-echo", token=SCOPED_TOKEN)
    # The fleet-wide event stream is not for scoped tokens: the page polls instead.
    expect(p.locator("#live")).to_have_text("polling")
    expect(p.locator("#cfg-slots")).to_be_visible()
    task_id = submit_task(p, f"scoped-{uuid.uuid4().hex[:8]}")
    expect(p.locator("#submit [data-role=task-state]")).to_contain_text(f"{task_id}: done")
    p.fill("#cfg-slots", "2")
    p.click("#config-editor button[type=submit]")
    expect(p.locator("#config-editor .note-error")).to_contain_text("admin token")
    assert stack.api("GET", "/automations/dash-echo/config").json()["config"].get("slots") != 2


@pytest.fixture(scope="module")
def static_url() -> Iterator[str]:
    """The dashboard's files from a plain HTTP server (no master, no API)."""
    handler = functools.partial(
        QuietHandler, directory=str(REPO / "fleet" / "master" / "dashboard" / "static")
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_js_helpers(browser: Browser, static_url: str) -> None:
    """The pure helpers, run in the browser: SSE parsing, rates, routes, schemas."""
    context = browser.new_context()
    p = context.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda err: errors.append(str(err)))
    p.goto(static_url)
    expect(p.locator("#signin")).to_be_visible()
    result = p.evaluate(
        r"""async () => {
        const { SSEParser } = await import("/js/sse.js");
        const { rateBetween } = await import("/js/store.js");
        const { parseRoute } = await import("/js/app.js");
        const { escapeHtml, fmtDuration } = await import("/js/render.js");
        const { fieldKind } = await import("/js/schemaform.js");
        const { typeName } = await import("/js/schemas.js");
        const { workersTable } = await import("/js/views/workers.js");
        const evil = "<img src=x onerror=alert(1)>";
        const base = {type: "t", up: true, state: "RUNNING", slots: {busy: 1, total: 2},
                      hardware: {cpu_count: 4}, last_seen: Date.now() / 1000};
        const shown = workersTable([
          {...base, worker_id: "ok", gen: {applied: 5, desired: 5}, lagging: false},
          {...base, worker_id: evil, gen: {applied: 4, desired: 5}, lagging: true,
           last_error: evil},
        ], document.createElement("div"));
        const rows = [...shown.querySelectorAll("tbody tr")];
        const parser = new SSEParser();
        const events = [];
        const text = ": ping\r\nevent: emit\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n" +
          "id: 7\ndata: plain\n\nevent: x\n\nretry: 500\n";
        for (const ch of text) events.push(...parser.feed(ch));
        return {
          events,
          retry: parser.retry,
          rate: rateBetween({t: 0, completed: 10, failed: 1, dead: 0},
                            {t: 2, completed: 16, failed: 2, dead: 1}),
          idle: rateBetween({t: 0, completed: 5, failed: 0, dead: 0},
                            {t: 2, completed: 5, failed: 0, dead: 0}),
          routes: [parseRoute("#/automation/a%2Fb"), parseRoute("#/workers"), parseRoute(""),
                   parseRoute("#/automation/a?state=done&run=r%2F1"),
                   parseRoute("#/automation/a?state=nope"), parseRoute("#/task/t/x%3Fy?attempt=2")],
          escaped: escapeHtml("<img src=x onerror='1'>&"),
          durations: [0.25, 75, 7200, 299.7, 59.6].map(fmtDuration),
          kind: fieldKind({}, {anyOf: [{type: "integer"}, {type: "null"}]}),
          type: typeName({}, {type: "array", items: {$ref: "#/$defs/Item"}}),
          lagging: rows.map((r) => r.classList.contains("lagging")),
          gens: rows.map((r) => r.querySelector("[data-col=gen]").textContent),
          errorText: rows[1].querySelector("[data-col=last_error]").textContent,
          idText: rows[1].querySelector(".mono").textContent,
          images: shown.querySelectorAll("img").length,
        };
    }"""
    )
    assert result["events"] == [
        {"event": "emit", "data": '{"a":\n1}', "id": ""},
        {"event": "message", "data": "plain", "id": "7"},
    ]
    assert result["retry"] == 500
    assert result["rate"] == {"t": 2, "perSecond": 3, "failureRate": 0.25}
    assert result["idle"]["failureRate"] is None
    assert result["routes"] == [
        {"name": "automation", "type": "a/b"},
        {"name": "workers"},
        {"name": "overview"},
        {"name": "automation", "type": "a", "state": "done", "run": "r/1"},
        {"name": "automation", "type": "a"},
        {"name": "task", "type": "t", "task": "x?y", "attempt": 2},
    ]
    assert result["escaped"] == "&lt;img src=x onerror=&#39;1&#39;&gt;&amp;"
    assert result["durations"] == ["250 ms", "1 m 15 s", "2 h 0 m", "5 m 0 s", "1 m 0 s"]
    assert result["kind"]["widget"] == "integer"
    assert result["kind"]["nullable"] is True
    assert result["type"] == "list[Item]"
    # A lagging worker stands out; data is rendered as text, never as markup.
    assert result["lagging"] == [False, True]
    assert result["gens"] == ["5 / 5", "4 / 5lagging"]
    assert result["errorText"] == result["idText"] == "<img src=x onerror=alert(1)>"
    assert result["images"] == 0
    context.close()
    assert errors == []
