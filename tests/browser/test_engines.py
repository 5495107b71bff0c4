"""Browser engines as plugins: the registry (built-ins and the entry-point group
``fleet.browser_engines``), a plugin engine driving a pool, clear errors for an engine
that is not installed, CloakBrowser wired to Debian's Chromium through its own binary
override, and the pool's stats in the worker's stats frame and on the dashboard."""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from fleet.browser import BrowserPool, BrowserUnavailable, engine_class, engine_names
from fleet.browser.engines import CloakEngine
from fleet.browser.pool import MARKER, find_processes
from fleet.core.browser import BrowserNeeds
from fleet.core.errors import ContractValueError
from fleet.worker.stats import TypeCounters, stats_frame
from tests.browser.engine_plugin import DIST, FLAG, RecordingEngine, write_dist
from tests.browser.stack import ADMIN_TOKEN, CHROMIUM, CHROMIUM_ARGS, Stack
from tests.support.redis_server import require_redis

pytestmark = pytest.mark.browser

TITLE_URL = "data:text/html,<title>from the engine</title>"


def need_chromium() -> None:
    if not os.path.exists(CHROMIUM):
        if require_redis():  # strict (CI) mode: .ci/run installs Chromium
            pytest.fail("Debian's chromium is required but not installed")
        pytest.skip("chromium not installed (apt-get install chromium)")


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test distribution's entry points, visible to importlib.metadata."""
    root = write_dist(tmp_path / "site")
    monkeypatch.syspath_prepend(str(root))
    return root


def pool_args(pool: BrowserPool) -> list[list[str]]:
    """Command lines of the pool's live browser processes."""
    found = []
    for proc in find_processes(f"{MARKER}{pool.pool_id}-"):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc.cmdline())
        except psutil.Error:
            continue
    return found


def test_needs_take_any_engine_name_and_refuse_what_is_not_one() -> None:
    assert BrowserNeeds(engine="my-vendor.stealth_2").engine == "my-vendor.stealth_2"
    for bad in ("", " chromium", "two words", "-x", 5, None):
        with pytest.raises(ContractValueError, match="engine"):
            BrowserNeeds(engine=bad)  # type: ignore[arg-type]


def test_the_registry_finds_entry_points_and_names_what_to_install(plugins: Path) -> None:
    names = engine_names()
    assert {"chromium", "cloak", "firefox", "webkit", "fleet-test-engine"} <= set(names)
    assert engine_class("fleet-test-engine") is RecordingEngine
    assert engine_class("cloak") is CloakEngine
    with pytest.raises(BrowserUnavailable) as broken:
        engine_class("fleet-test-broken")
    assert f"browser engine 'fleet-test-broken' needs `pip install '{DIST}'`" in str(broken.value)
    assert "no_such_engine_module" in str(broken.value)
    with pytest.raises(BrowserUnavailable, match="is not a BrowserEngine"):
        engine_class("fleet-test-notengine")
    with pytest.raises(BrowserUnavailable, match="unknown browser engine 'netscape'") as unknown:
        engine_class("netscape")
    assert "fleet-test-engine" in str(unknown.value) and "fleet.browser_engines" in str(
        unknown.value
    )


async def test_a_plugin_engine_launches_the_pools_browsers(plugins: Path) -> None:
    need_chromium()
    RecordingEngine.launches.clear()
    pool = BrowserPool(BrowserNeeds(size=1, max_uses=5, engine="fleet-test-engine"))
    try:
        async with pool.acquire() as page:
            await page.goto(TITLE_URL)
            assert await page.title() == "from the engine"
            # the browser's own process got the engine's flag and the pool's marker
            assert any(
                FLAG in args and any(a.startswith(f"{MARKER}{pool.pool_id}-") for a in args)
                for args in pool_args(pool)
            )
        assert len(RecordingEngine.launches) == 1
        stats = pool.stats()
        assert stats["engine"] == "fleet-test-engine" and stats["launched"] == 1
        assert stats["error"] is None
    finally:
        await pool.close()
    assert pool_args(pool) == []


@pytest.mark.parametrize("engine", ["fleet-test-broken", "cloak"])
async def test_an_engine_that_is_not_installed_fails_every_acquire_and_logs_once(
    engine: str, plugins: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    if engine == "cloak":  # as if cloakbrowser were not installed, whatever the venv has
        monkeypatch.setitem(sys.modules, "cloakbrowser", None)
        expected = "browser engine 'cloak' needs `pip install 'fleet-automation[cloak]'`"
    else:
        expected = f"browser engine 'fleet-test-broken' needs `pip install '{DIST}'`"
    caplog.set_level(logging.ERROR, logger="fleet.browser")
    pool = BrowserPool(BrowserNeeds(size=1, engine=engine))
    try:
        for _ in range(3):
            with pytest.raises(BrowserUnavailable) as caught:
                async with pool.acquire(timeout=10):
                    pass
            assert expected in str(caught.value)
        assert expected in pool.stats()["error"]
    finally:
        await pool.close()
    logged = [r for r in caplog.records if r.name == "fleet.browser"]
    assert len(logged) == 1 and expected in logged[0].getMessage()


async def test_cloak_refuses_an_executable_path() -> None:
    pool = BrowserPool(BrowserNeeds(engine="cloak", executable_path=CHROMIUM))
    try:
        with pytest.raises(BrowserUnavailable, match="CLOAKBROWSER_BINARY_PATH"):
            async with pool.acquire(timeout=10):
                pass
    finally:
        await pool.close()


async def test_cloak_launches_through_cloakbrowser_with_its_binary_override(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real package, its binary pointed at Debian's Chromium (nothing downloaded)."""
    need_chromium()
    if importlib.util.find_spec("cloakbrowser") is None:
        if require_redis():  # strict (CI) mode: the test extra installs cloakbrowser
            pytest.fail("cloakbrowser is required (pip install -e '.[test]')")
        pytest.skip("cloakbrowser not installed (pip install 'fleet-automation[cloak]')")
    monkeypatch.setenv("CLOAKBROWSER_BINARY_PATH", CHROMIUM)
    monkeypatch.setenv("CLOAKBROWSER_CACHE_DIR", str(tmp_path / "cloak-cache"))
    monkeypatch.setenv("CLOAKBROWSER_SUPPRESS_FONT_WARNING", "1")
    monkeypatch.delenv("CLOAKBROWSER_LICENSE_KEY", raising=False)
    pool = BrowserPool(BrowserNeeds(size=1, max_uses=1, engine="cloak"))
    try:
        async with pool.acquire(proxy=None) as page:
            await page.goto(TITLE_URL)
            assert await page.title() == "from the engine"
            main = [a for a in pool_args(pool) if not any(x.startswith("--type=") for x in a)]
            assert main, "the browser's own process carries the pool's marker"
            # cloakbrowser built the command line: its fingerprint seed is there
            assert any(a.startswith("--fingerprint=") for args in main for a in args)
        stats = pool.stats()
        assert stats["engine"] == "cloak" and stats["launched"] >= 1
    finally:
        await pool.close()
    assert pool_args(pool) == []


def test_stats_frame_carries_the_browser_pools() -> None:
    pool = {"engine": "chromium", "size": 2, "warm": 2, "in_use": 1}
    frame = stats_frame(
        ts=1.0, slots=[], counters=TypeCounters(), per_second=0, cpu_percent=0, rss_bytes=0,
        browser_pools=[pool],
    )  # fmt: skip
    assert frame["browser_pools"] == [pool]
    plain = stats_frame(
        ts=1.0, slots=[], counters=TypeCounters(), per_second=0, cpu_percent=0, rss_bytes=0
    )
    assert "browser_pools" not in plain


@pytest.fixture
def engine_stack(tmp_path: Path) -> Iterator[Stack]:
    """A master and a worker process running tests/browser/engine_automation.py; the
    plugin engine is registered for both through PYTHONPATH."""
    need_chromium()
    root = write_dist(tmp_path / "site")
    stack = Stack(
        backend_url=f"sqlite:///{tmp_path / 'fleet.db'}",
        logs=tmp_path,
        worker_id="engine-worker-1",
        plugin="tests.browser.engine_automation",
        python_path=(str(root),),
    )
    try:
        stack.start()
        yield stack
    finally:
        stack.stop()


def test_a_worker_reports_its_pool_and_the_dashboard_shows_it(engine_stack: Stack) -> None:
    from playwright.sync_api import expect, sync_playwright

    stack = engine_stack
    for i in range(3):
        body = {"payload": {"title": f"t{i}"}}
        assert stack.api("POST", "/automations/engine-visit/tasks", json=body).status_code < 300
    seen: dict[str, Any] = {}

    def reported() -> bool:
        workers = stack.api("GET", "/automations/engine-visit/workers").json()
        pools = workers[0]["browser_pools"] if workers else []
        seen["pools"] = pools
        # 3 tasks, max_uses 2: one browser retired and replaced by the time all ran
        return bool(pools) and pools[0]["acquired"] >= 3 and pools[0]["retired"] >= 1

    stack.wait_for(reported, 30, "the worker's stats frame to report its browser pool")
    (pool,) = seen["pools"]
    assert pool["engine"] == "fleet-test-engine" and pool["size"] == 1
    assert pool["crashed"] == 0 and pool["launched"] >= 2
    assert pool["launch_seconds_avg"] > 0 and pool["launch_seconds_last"] > 0
    assert {"warm", "in_use", "idle", "launch_failures", "error"} <= set(pool)
    # the raw stats frame carries the same list
    one = stack.api("GET", "/automations/engine-visit/workers/engine-worker-1").json()
    assert one["stats"]["browser_pools"][0]["engine"] == "fleet-test-engine"

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda err: errors.append(str(err)))
            page.goto(f"{stack.url}/#/workers")
            page.fill("#token", ADMIN_TOKEN)
            page.click("#signin button[type=submit]")
            row = page.locator("tr[data-worker='engine-worker-1']")
            cell = row.locator("[data-col=browsers] .browser-pool[data-engine=fleet-test-engine]")
            expect(cell).to_contain_text("warm", timeout=15_000)
            expect(cell.locator("[data-stat=retired]")).to_contain_text("retired")
            expect(cell.locator("[data-stat=crashed]")).to_have_text("0 crashed")
            expect(cell.locator("[data-stat=launch]")).to_contain_text("launch")
            assert page.locator("th", has_text="browsers").count() == 1
            assert errors == []
        finally:
            browser.close()
