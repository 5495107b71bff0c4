"""``BrowserPool``: pre-warmed browsers that slots borrow a fresh context from.

What an automation's ``Browser = BrowserNeeds(...)`` gets as ``ctx.browser``:

* ``size`` browsers are launched when the worker boots (in the background;
  the first ``acquire`` waits for one);
* each ``acquire()`` opens a new browser context (no cookies or storage shared
  between tasks) and yields a page in it; the context is closed afterwards;
* a browser is retired after ``max_uses`` acquisitions, when it crashed or
  disconnected, or when opening or closing a context hangs; a new one is
  launched in its place;
* retiring a browser kills every process it started: its process tree is
  read while it runs (each browser carries a unique ``--fleet-browser=``
  marker in its command line), and whatever survives ``close()`` is killed.
  Leaked browser processes were the cause of real outages; this is why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import psutil

from fleet.core.browser import BrowserNeeds
from fleet.core.errors import BrowserUnavailable

log = logging.getLogger("fleet.browser")

#: Seconds a launch, a new context or a context close may take before the
#: browser counts as hung.
LAUNCH_TIMEOUT = 30.0
STEP_TIMEOUT = 15.0
#: Seconds ``acquire`` waits for a free browser.
ACQUIRE_TIMEOUT = 120.0
#: Longest pause between attempts to launch a replacement that failed.
RELAUNCH_CAP = 30.0
#: Arguments every Chromium gets: no sandbox (workers often run as root in
#: containers), no background chatter.
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
#: Where a system Chromium is looked for when Playwright has none of its own.
SYSTEM_CHROMIUM = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
MARKER = "--fleet-browser="


@dataclass(eq=False)
class _Browser:
    """One launched browser and what is known of its processes."""

    handle: Any
    marker: str
    uses: int = 0
    broken: bool = False
    pids: set[int] = field(default_factory=set)

    def alive(self) -> bool:
        return not self.broken and bool(self.handle.is_connected())


def find_processes(prefix: str) -> list[psutil.Process]:
    """Processes with a command-line argument starting with ``prefix`` (one
    browser's marker, or a whole pool's), with all their descendants."""
    found: dict[int, psutil.Process] = {}
    for proc in psutil.process_iter(["cmdline"]):
        try:
            cmdline = proc.info.get("cmdline") or []
            if any(arg.startswith(prefix) for arg in cmdline):
                found[proc.pid] = proc
                for child in proc.children(recursive=True):
                    found[child.pid] = child
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return list(found.values())


def kill_pids(pids: set[int]) -> int:
    """SIGKILL every process of ``pids`` still running; returns how many were."""
    killed = 0
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            proc = psutil.Process(pid)
            if proc.status() != psutil.STATUS_ZOMBIE:
                proc.kill()
                killed += 1
    return killed


class BrowserPool:
    """A pool of warm browsers for one :class:`BrowserNeeds`.

    Args:
        needs: What the automation declared.
    """

    def __init__(self, needs: BrowserNeeds) -> None:
        self.needs = needs
        self.pool_id = uuid.uuid4().hex[:12]
        self._prefix = f"{MARKER}{self.pool_id}-"
        self._idle: asyncio.Queue[_Browser] = asyncio.Queue()
        self._all: set[_Browser] = set()
        self._playwright: Any = None
        self._launcher: Any = None
        self._started: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False
        self._launch_error: BaseException | None = None
        self._count = 0
        #: Browsers launched and retired so far (for stats and tests).
        self.launched = 0
        self.retired = 0

    # ------------------------------------------------------------------ lifecycle
    def warm(self) -> None:
        """Start launching the browsers in the background (idempotent)."""
        if self._started is None:
            self._started = asyncio.create_task(self._start(), name="fleet-browser-warm")
            self._started.add_done_callback(self._warmed)

    def _warmed(self, task: asyncio.Task[None]) -> None:
        # a failed warm-up is logged once here and raised by every acquire
        if not task.cancelled() and task.exception() is not None:
            log.error("browser pool (%s) unavailable: %s", self.needs.engine, task.exception())

    async def _start(self) -> None:
        try:
            from playwright.async_api import async_playwright
        except ImportError as exc:
            self._launch_error = BrowserUnavailable(
                "the browser pool needs Playwright: pip install 'fleet-automation[browser]'"
            )
            raise self._launch_error from exc
        engine = self.needs.engine
        if engine == "cloak":
            self._launch_error = BrowserUnavailable(
                "engine 'cloak' is provided by a separate plugin that is not installed"
            )
            raise self._launch_error
        self._playwright = await async_playwright().start()
        self._launcher = getattr(self._playwright, engine)
        results = await asyncio.gather(
            *(self._launch() for _ in range(self.needs.size)), return_exceptions=True
        )
        failures = [r for r in results if isinstance(r, BaseException)]
        if len(failures) == len(results):
            self._launch_error = BrowserUnavailable(
                f"no {engine} browser could be launched: {failures[0]}"
            )
            raise self._launch_error

    def _executable(self) -> str | None:
        if self.needs.executable_path:
            return self.needs.executable_path
        if self.needs.engine != "chromium":
            return None
        # Playwright's own download first; else the system's Chromium
        with contextlib.suppress(Exception):
            path = str(self._launcher.executable_path)
            if path and os.path.exists(path):
                return None
        for name in SYSTEM_CHROMIUM:
            found = shutil.which(name)
            if found:
                return found
        return None

    async def _launch(self) -> None:
        self._count += 1
        # fixed width: no browser's marker is a prefix of another's
        marker = f"{self._prefix}{self._count:06d}"
        args = [*self.needs.launch_args, marker]
        if self.needs.engine == "chromium":
            args = [*CHROMIUM_ARGS, *args]
        try:
            handle = await asyncio.wait_for(
                self._launcher.launch(
                    headless=self.needs.headless, args=args, executable_path=self._executable()
                ),
                LAUNCH_TIMEOUT,
            )
        except BaseException:
            kill_pids({p.pid for p in find_processes(marker)})
            raise
        browser = _Browser(handle, marker)
        browser.pids = {p.pid for p in find_processes(marker)}
        if self._closed:
            await self._retire(browser)
            return
        self._all.add(browser)
        self.launched += 1
        await self._idle.put(browser)

    async def close(self) -> None:
        """Retire every browser, kill what they started and stop Playwright."""
        self._closed = True
        if self._started is not None and not self._started.done():
            self._started.cancel()
            with contextlib.suppress(BaseException):
                await self._started
        for task in list(self._background):
            task.cancel()
        for task in list(self._background):
            with contextlib.suppress(BaseException):
                await task
        await asyncio.gather(*(self._retire(b) for b in list(self._all)), return_exceptions=True)
        if self._playwright is not None:
            with contextlib.suppress(Exception):
                await self._playwright.stop()
            self._playwright = None
        # a last sweep for anything launched by this pool that escaped
        kill_pids({p.pid for p in find_processes(self._prefix)})

    # ------------------------------------------------------------------ acquire
    @contextlib.asynccontextmanager
    async def acquire(
        self, proxy: str | None = None, *, timeout: float | None = None, **context_options: Any
    ) -> AsyncIterator[Any]:
        """Borrow a page in a fresh browser context.

        Args:
            proxy: Proxy URL for this context (``http://user:pass@host:port``).
            timeout: Seconds to wait for a free browser (default ``ACQUIRE_TIMEOUT``).
            context_options: Passed to Playwright's ``new_context``.

        Yields:
            A Playwright ``Page``.

        Raises:
            BrowserUnavailable: No browser can be launched, or none became free in time.
        """
        wait = ACQUIRE_TIMEOUT if timeout is None else timeout
        try:
            browser = await asyncio.wait_for(self._take(), wait)
        except TimeoutError:
            raise BrowserUnavailable(
                f"no browser became free within {wait:g} s ({self.stats()})"
            ) from None
        context = None
        try:
            options = dict(context_options)
            if proxy:
                options["proxy"] = proxy_option(proxy)
            try:
                opening = browser.handle.new_context(**options)
                context = await asyncio.wait_for(opening, STEP_TIMEOUT)
                page = await asyncio.wait_for(context.new_page(), STEP_TIMEOUT)
            except Exception:
                browser.broken = True
                raise
            yield page
        finally:
            browser.uses += 1
            if context is not None:
                try:
                    await asyncio.wait_for(context.close(), STEP_TIMEOUT)
                except Exception:
                    browser.broken = True
            self._give_back(browser)

    async def _take(self) -> _Browser:
        if self._closed:
            raise BrowserUnavailable("the browser pool is closed")
        self.warm()
        while True:
            if self._launch_error is not None and self._idle.empty():
                raise self._launch_error
            getter = asyncio.ensure_future(self._idle.get())
            assert self._started is not None
            waiters: set[asyncio.Future[Any]] = {getter}
            if not self._started.done():
                waiters.add(self._started)
            try:
                done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            except BaseException:  # our caller gave up (acquire's timeout, a cancel)
                self._drop_getter(getter)
                raise
            if getter not in done:
                self._drop_getter(getter)
                continue  # warming ended (maybe with an error): look again
            browser = getter.result()
            if browser.alive():
                return browser
            self._give_back(browser)  # crashed while idle: replace it

    def _drop_getter(self, getter: asyncio.Future[_Browser]) -> None:
        """Stop waiting for a browser; one the getter already took goes back."""
        if getter.done():
            if not getter.cancelled() and getter.exception() is None:
                self._idle.put_nowait(getter.result())
        else:
            getter.cancel()

    def _give_back(self, browser: _Browser) -> None:
        if self._closed:
            self._spawn(self._retire(browser))
            return
        if browser.alive() and browser.uses < self.needs.max_uses:
            self._idle.put_nowait(browser)
            return
        self._spawn(self._replace(browser))

    async def _replace(self, browser: _Browser) -> None:
        await self._retire(browser)
        delay = 1.0
        while not self._closed:
            try:
                await self._launch()
                return
            except Exception as exc:
                log.error("could not launch a replacement browser (again in %.0fs): %s", delay, exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, RELAUNCH_CAP)

    async def _retire(self, browser: _Browser) -> None:
        self._all.discard(browser)
        # what it runs now, in case it started more since launch
        browser.pids |= {p.pid for p in find_processes(browser.marker)}
        with contextlib.suppress(Exception):
            await asyncio.wait_for(browser.handle.close(), STEP_TIMEOUT)
        killed = kill_pids(browser.pids)
        if killed:
            log.warning("killed %d leftover process(es) of a retired browser", killed)
        self.retired += 1

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ------------------------------------------------------------------ stats
    def stats(self) -> dict[str, int]:
        """Browsers idle, alive in total, launched and retired so far."""
        return {
            "idle": self._idle.qsize(),
            "alive": len(self._all),
            "launched": self.launched,
            "retired": self.retired,
        }


def proxy_option(url: str) -> dict[str, str]:
    """Playwright's proxy dict from ``scheme://user:pass@host:port`` (credentials
    may be percent-encoded, as in any URL)."""
    parts = urlsplit(url)
    server = f"{parts.scheme or 'http'}://{parts.hostname}"
    if parts.port:
        server += f":{parts.port}"
    option = {"server": server}
    if parts.username:
        option["username"] = unquote(parts.username)
    if parts.password:
        option["password"] = unquote(parts.password)
    return option
