"""The browser pool behind ctx.browser, with Debian's Chromium: fresh contexts,
retirement after max_uses, crash recovery, and no browser process left behind."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import psutil
import pytest

from fleet.browser import BrowserPool, BrowserUnavailable
from fleet.browser.pool import MARKER, find_processes
from fleet.core.browser import BrowserNeeds
from tests.browser.stack import CHROMIUM
from tests.support.redis_server import require_redis
from tests.worker.procs import ROOT, fleet_env

pytestmark = pytest.mark.browser


@pytest.fixture(autouse=True)
def chromium_present() -> None:
    if not os.path.exists(CHROMIUM):
        if require_redis():  # strict (CI) mode: .ci/run installs Chromium
            pytest.fail("Debian's chromium is required but not installed")
        pytest.skip("chromium not installed (apt-get install chromium)")


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"<html><title>page {self.path}</title><body>{self.path}</body></html>".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        if self.path == "/set":
            self.send_header("Set-Cookie", "seen=1; Path=/")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _living(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE  # a zombie is dead, only unreaped
    except psutil.NoSuchProcess:
        return False


def pool_processes(pool: BrowserPool) -> list[psutil.Process]:
    """Every live process the pool's browsers started."""
    return [p for p in find_processes(f"{MARKER}{pool.pool_id}-") if _living(p)]


def markers_of(pool: BrowserPool) -> set[str]:
    found = set()
    for proc in pool_processes(pool):
        try:
            args = proc.cmdline()
        except psutil.Error:
            continue
        found |= {a for a in args if a.startswith(f"{MARKER}{pool.pool_id}")}
    return found


async def test_pages_come_from_fresh_contexts(site: str) -> None:
    pool = BrowserPool(BrowserNeeds(size=1, max_uses=10))
    try:
        async with pool.acquire() as page:
            await page.goto(f"{site}/set")
            assert await page.title() == "page /set"
            assert [c["name"] for c in await page.context.cookies()] == ["seen"]
        async with pool.acquire() as page:
            await page.goto(f"{site}/other")
            assert await page.context.cookies() == []  # nothing shared between tasks
        assert pool.stats()["launched"] == 1  # the same warm browser served both
    finally:
        await pool.close()
    assert pool_processes(pool) == []


async def test_a_browser_is_retired_after_max_uses_and_its_processes_die(site: str) -> None:
    pool = BrowserPool(BrowserNeeds(size=1, max_uses=2))
    try:
        async with pool.acquire() as page:
            await page.goto(f"{site}/a")
            assert pool.stats()["in_use"] == 1 and pool.stats()["idle"] == 0
        first = markers_of(pool)
        assert len(first) == 1
        async with pool.acquire() as page:
            await page.goto(f"{site}/b")
        async with pool.acquire() as page:  # a replacement browser by now
            await page.goto(f"{site}/c")
            assert await page.title() == "page /c"
        stats = pool.stats()
        assert stats["retired"] >= 1 and stats["launched"] >= 2
        assert stats["crashed"] == 0 and stats["in_use"] == 0 and stats["acquired"] == 3
        assert stats["warm"] == 1 and stats["engine"] == "chromium" and stats["error"] is None
        assert 0 < stats["launch_seconds_avg"] < 30 and 0 < stats["launch_seconds_last"] < 30
        assert markers_of(pool).isdisjoint(first)  # the retired browser left nothing
    finally:
        await pool.close()
    assert pool_processes(pool) == []


async def test_a_crashed_browser_is_replaced(site: str) -> None:
    pool = BrowserPool(BrowserNeeds(size=1, max_uses=100))
    try:
        async with pool.acquire() as page:
            await page.goto(f"{site}/before")
        (marker,) = markers_of(pool)
        main = [
            p
            for p in pool_processes(pool)
            if marker in p.cmdline() and "--type" not in " ".join(p.cmdline())
        ]
        assert len(main) == 1  # the browser's own process, not its renderers
        for proc in main:
            os.kill(proc.pid, signal.SIGKILL)
        await asyncio.sleep(0.5)
        async with pool.acquire() as page:
            await page.goto(f"{site}/after")
            assert await page.title() == "page /after"
        stats = pool.stats()
        assert stats["launched"] == 2 and stats["crashed"] == 1 and stats["retired"] == 1
    finally:
        await pool.close()
    assert pool_processes(pool) == []


async def test_concurrent_acquires_share_the_pool(site: str) -> None:
    pool = BrowserPool(BrowserNeeds(size=2, max_uses=3))

    async def visit(i: int) -> str:
        async with pool.acquire() as page:
            await page.goto(f"{site}/p{i}")
            title: str = await page.title()
            return title

    try:
        titles = await asyncio.gather(*(visit(i) for i in range(8)))
        assert titles == [f"page /p{i}" for i in range(8)]
        assert pool.stats()["warm"] <= 2
    finally:
        await pool.close()
    assert pool_processes(pool) == []


async def test_an_engine_that_cannot_launch_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "cloakbrowser", None)  # not installed, whatever the venv has
    pool = BrowserPool(BrowserNeeds(size=1, engine="cloak"))
    try:
        with pytest.raises(BrowserUnavailable, match="cloak"):
            async with pool.acquire():
                pass
    finally:
        await pool.close()
    missing = BrowserPool(BrowserNeeds(size=1, executable_path="/nonexistent/chromium"))
    try:
        with pytest.raises(BrowserUnavailable, match="could be launched"):
            async with missing.acquire(timeout=60):
                pass
    finally:
        await missing.close()


def test_fleet_run_gives_slots_a_browser_and_leaves_no_process(site: str) -> None:
    """End to end: `fleet run` of an automation that declares Browser; every
    task's page comes from the pool, and the run leaves no browser behind."""
    payloads = [f'{{"url": "{site}/set"}}'] + [f'{{"url": "{site}/t{i}"}}' for i in range(4)]
    args = [sys.executable, "-m", "fleet", "--log-level", "ERROR", "run", "browser-visit"]
    args += ["--plugin", "tests.browser.browser_plugin", "--slots", "2"]
    for payload in payloads:
        args += ["--payload", payload]
    result = subprocess.run(
        args, cwd=ROOT, env=fleet_env(), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    emitted = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert sorted(e["title"] for e in emitted) == sorted(
        f"page {p}" for p in ["/set", "/t0", "/t1", "/t2", "/t3"]
    )
    # the cookie set by /set never reaches another task's context
    assert all(e["cookies"] == (1 if e["url"].endswith("/set") else 0) for e in emitted)
    leftovers = [p for p in find_processes(MARKER) if _living(p)]
    assert leftovers == []


async def test_a_timed_out_acquire_does_not_swallow_a_browser(site: str) -> None:
    pool = BrowserPool(BrowserNeeds(size=1, max_uses=100))
    try:
        async with pool.acquire() as page:
            await page.goto(f"{site}/busy")
            # the only browser is in use: a second acquire gives up after its timeout
            with pytest.raises(BrowserUnavailable, match="no browser became free"):
                async with pool.acquire(timeout=0.3):
                    pass
        # the browser given back is still there for the next task
        async with pool.acquire(timeout=10) as page:
            await page.goto(f"{site}/next")
            assert await page.title() == "page /next"
        assert pool.stats()["launched"] == 1
    finally:
        await pool.close()
