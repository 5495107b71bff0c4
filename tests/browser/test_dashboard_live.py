"""The dashboard follows the event stream, and polls only while it is down, in
Debian's headless Chromium against a real master and worker.

While the stream is live the page builds its picture from the master's frames
(``types``, ``depths``, ``workers``, pushed ``worker`` states and ``emit``s):
no request to ``/api/v1/automations`` or ``/api/v1/workers``, yet a new
worker, a changed depth and an emit show up within a few seconds. When the
stream is cut the page polls those two until the stream is back, then stops.

The fixtures are those of test_dashboard.py; the page's logic is backend-blind,
so SQLite only.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any
from urllib.parse import urlparse

import pytest
from playwright.sync_api import Browser, Page, Request, Route, expect

from tests.browser.stack import Stack
from tests.browser.test_dashboard import Watch, browser, page, sign_in, stack, static_url

pytestmark = pytest.mark.browser
__all__ = ["browser", "page", "stack", "static_url"]  # fixtures used by name

TYPE = "dash-echo"
POLLED = ("/api/v1/automations", "/api/v1/workers")
EVENTS = "**/api/v1/events*"
#: How long a live page is watched for polls (the store polled every 2 s).
QUIET_SECONDS = 6.0

#: Lets a test cut the page's live event stream as a network loss would: every
#: fetch of /api/v1/events gets a signal the test can abort (window.__cutEvents()).
CUT_SCRIPT = """
(() => {
  const real = window.fetch.bind(window);
  const cuts = [];
  window.__cutEvents = () => { for (const cut of cuts.splice(0)) cut(); };
  window.fetch = (input, init = {}) => {
    const url = typeof input === "string" ? input : input.url;
    if (!url.includes("/api/v1/events")) return real(input, init);
    const own = new AbortController();
    if (init.signal) init.signal.addEventListener("abort", () => own.abort());
    cuts.push(() => own.abort());
    return real(input, { ...init, signal: own.signal });
  };
})();
"""


class Polls:
    """Requests of the page to the polled endpoints (exact paths), with times."""

    def __init__(self, page: Page) -> None:
        self.seen: list[tuple[float, str]] = []
        page.on("request", self._request)

    def _request(self, request: Request) -> None:
        path = urlparse(request.url).path
        if path in POLLED:
            self.seen.append((time.monotonic(), path))

    def since(self, t: float) -> list[str]:
        return [path for at, path in self.seen if at >= t]


def scheduled_now(stack: Stack) -> int:
    return int(stack.api("GET", f"/automations/{TYPE}/queue").json()["scheduled"])


def submit(stack: Stack, payload: dict[str, Any], **options: Any) -> str:
    res = stack.api("POST", f"/automations/{TYPE}/tasks", json={"payload": payload, **options})
    assert res.status_code == 202, res.text
    return str(res.json()["task_id"])


def wait_at_least(p: Page, since: float, seconds: float) -> None:
    left = since + seconds - time.monotonic()
    if left > 0:
        p.wait_for_timeout(left * 1000)


def settle_live(p: Page) -> float:
    """Wait for the live badge and the one refresh it brings; the time after it."""
    expect(p.locator("#live")).to_have_text("live")
    p.wait_for_timeout(1500)  # a poll in flight when the stream came, and the one refresh
    return time.monotonic()


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)
def test_a_live_page_does_not_poll_yet_shows_every_change(
    page: tuple[Page, Watch], stack: Stack
) -> None:
    p, _ = page
    polls = Polls(p)
    sign_in(p, stack, f"#/automation/{TYPE}")
    expect(p.locator(f"#automation tr[data-worker='{stack.worker_id}']")).to_be_visible()
    start = settle_live(p)

    # A depth change: a delayed task waits in "scheduled" (the worker leaves it).
    before = scheduled_now(stack)
    delayed = submit(stack, {"text": f"later-{uuid.uuid4().hex[:6]}"}, delay_seconds=600)
    scheduled = p.locator("#automation .type-card [data-stat=scheduled] dd")
    extra = f"dash-worker-{uuid.uuid4().hex[:6]}"
    row = p.locator(f"#automation tr[data-worker='{extra}']")
    try:
        expect(scheduled).to_have_text(str(before + 1), timeout=6000)
        # An emit: appended to the tail from its event, with no refetch.
        text = f"live-{uuid.uuid4().hex[:8]}"
        submit(stack, {"text": text})
        expect(p.locator("#tail li pre", has_text=text)).to_be_visible(timeout=6000)
        # A new worker: its row comes with the next workers frame, and the card counts it.
        proc = stack.spawn_worker(extra)
        try:
            state = row.locator("[data-col=state]")
            expect(state).to_have_text(re.compile("RUNNING|IDLE"), timeout=15_000)
            card = p.locator("#automation .type-card [data-stat=workers] dd")
            expect(card).to_have_text("2 / 2", timeout=6000)
        finally:
            proc.terminate()
            proc.wait(timeout=15)
        expect(state).to_have_text(re.compile("STOPPED|DOWN"), timeout=6000)
        wait_at_least(p, start, QUIET_SECONDS)
        assert polls.since(start) == [], "a live page polled"
        expect(p.locator("#live")).to_have_text("live")
    finally:
        stack.api("DELETE", f"/automations/{TYPE}/tasks/{delayed}")
        stack.api("DELETE", f"/automations/{TYPE}/workers/{extra}")
    expect(scheduled).to_have_text(str(before), timeout=6000)
    expect(row).to_have_count(0, timeout=6000)


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)
def test_a_cut_stream_falls_back_to_polling_until_it_is_back(
    page: tuple[Page, Watch], stack: Stack
) -> None:
    p, _ = page
    p.add_init_script(CUT_SCRIPT)
    polls = Polls(p)
    sign_in(p, stack, f"#/automation/{TYPE}")
    start = settle_live(p)
    p.wait_for_timeout(2500)
    assert polls.since(start) == []

    # Cut the live stream, and refuse every reconnection while the test says so.
    refused: list[str] = []

    def refuse(route: Route) -> None:
        refused.append(route.request.url)
        route.abort()

    p.route(EVENTS, refuse)
    cut = time.monotonic()
    p.evaluate("window.__cutEvents()")
    expect(p.locator("#live")).to_have_text(re.compile("offline|connecting"))
    p.wait_for_timeout(4500)
    down = polls.since(cut)
    assert down.count("/api/v1/automations") >= 2, down
    assert down.count("/api/v1/workers") >= 2, down
    assert refused, "the page did not try to reconnect"

    # The polled picture still follows the fleet.
    before = scheduled_now(stack)
    delayed = submit(stack, {"text": f"polled-{uuid.uuid4().hex[:6]}"}, delay_seconds=600)
    scheduled = p.locator("#automation .type-card [data-stat=scheduled] dd")
    try:
        expect(scheduled).to_have_text(str(before + 1), timeout=6000)
        expect(p.locator(f"#automation tr[data-worker='{stack.worker_id}']")).to_be_visible()
        expect(p.locator("#live")).not_to_have_text("live")

        # The stream is back: live again, one refresh, then no more polls.
        p.unroute(EVENTS, refuse)
        back = settle_live(p)
        p.wait_for_timeout(QUIET_SECONDS * 1000)
        assert polls.since(back) == [], "the page kept polling once the stream was back"
    finally:
        stack.api("DELETE", f"/automations/{TYPE}/tasks/{delayed}")
    # ... and the frames carry the next change.
    expect(scheduled).to_have_text(str(before), timeout=6000)


def test_store_applies_frames_without_asking_the_api(browser: Browser, static_url: str) -> None:
    """The store's frame handling, run in the browser on the bare static files."""
    context = browser.new_context()
    p = context.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda err: errors.append(str(err)))
    asked: list[str] = []
    p.on("request", lambda r: asked.append(urlparse(r.url).path) if "/api/" in r.url else None)
    p.goto(static_url)
    expect(p.locator("#signin")).to_be_visible()
    result = p.evaluate(
        r"""async () => {
        const { Store } = await import("/js/store.js");
        const s = new Store();
        s.running = true;
        s.status = "live";
        const seen = [];
        for (const name of ["update", "emit", "resync"]) {
          s.addEventListener(name, (e) =>
            seen.push(e.type === "emit" ? e.detail.entry.id : e.type));
        }
        const depth = (n) => ({pending: {high: 0, normal: n, low: 0}, pending_total: n,
                               processing: 0, scheduled: 0, dead: 0,
                               counters: {completed: 0, failed: 0, dead: 0}});
        const view = {type: "a", worker_id: "w1", up: true, lagging: false, state: "RUNNING",
                      gen: {applied: 1, desired: 1}, slots: {busy: 0, total: 1}};
        const feed = (event, data) => s.onServerEvent({event, data, id: ""});
        feed("hello", {types: ["a", "c"]});
        feed("depths", {a: depth(3)});
        feed("workers", [view, {...view, type: "c", worker_id: "w2", up: false}]);
        feed("types", [
          {type: "a", kind: "BatchAutomation", catalogued: true, has_queue: true, has_stream: true},
          {type: "c", kind: "ContinuousAutomation", catalogued: true, has_queue: false,
           has_stream: false},
        ]);
        await Promise.resolve();
        const first = JSON.parse(JSON.stringify(s.automations));
        feed("depths", {a: depth(5)});
        feed("emit", {type: "a", data: {id: "e1", payload: {x: 1}}});
        feed("worker", {type: "a", data: {worker_id: "w1", state: "DRAINING"}});
        feed("config", {type: "a", data: {gen: 2}});
        await Promise.resolve();
        const drained = s.workers.find((w) => w.worker_id === "w1").state;
        feed("worker", {type: "a", data: {worker_id: "w1", state: "STOPPED"}});
        await Promise.resolve();
        const stopped = s.workers.find((w) => w.worker_id === "w1");
        const afterStop = s.automations.find((r) => r.type === "a").workers;
        feed("types", [
          {type: "c", kind: "ContinuousAutomation", catalogued: true, has_queue: false,
           has_stream: false},
        ]);
        await new Promise((resolve) => setTimeout(resolve, 300));
        const live = {first, rows: s.automations.length, seen, drained,
                      stopped: [stopped.state, stopped.up, stopped.reported_state], afterStop,
                      depthsKept: [...s.depths.keys()]};
        s.stop();
        return live;
    }"""
    )
    assert result["first"] == [
        {
            "type": "a",
            "kind": "BatchAutomation",
            "catalogued": True,
            "has_queue": True,
            "has_stream": True,
            "workers": {"total": 1, "up": 1, "lagging": 0},
            "queue": result["first"][0]["queue"],
        },
        {
            "type": "c",
            "kind": "ContinuousAutomation",
            "catalogued": True,
            "has_queue": False,
            "has_stream": False,
            "workers": {"total": 1, "up": 0, "lagging": 0},
            "queue": None,
        },
    ]
    assert result["first"][0]["queue"]["pending_total"] == 3
    # frames of one tick make one update; the emit is passed on, nothing is fetched
    assert result["seen"] == ["resync", "update", "e1", "update", "update", "update"]
    assert result["drained"] == "DRAINING"
    assert result["stopped"] == ["DOWN", False, "STOPPED"]
    assert result["afterStop"] == {"total": 1, "up": 0, "lagging": 0}
    assert result["rows"] == 1 and result["depthsKept"] == []
    assert asked == []
    context.close()
    assert errors == []
