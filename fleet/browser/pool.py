"""``BrowserPool``: pre-warmed browsers that slots borrow a fresh context from.

What an automation's ``Browser = BrowserNeeds(...)`` gets as ``ctx.browser``:

* ``size`` browsers are launched when the worker boots (in the background;
  the first ``acquire`` waits for one) by the declaration's engine
  (:mod:`fleet.browser.engines`: built in, or a plugin's);
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
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import psutil

from fleet.browser.engines import BrowserEngine, engine_class
from fleet.core.browser import BrowserNeeds
from fleet.core.error_book import current
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

    The engine named by ``needs.engine`` is looked up and started at warm-up; when it
    cannot be (unknown, not installed), that is logged once and every ``acquire``
    raises it as :class:`BrowserUnavailable`.

    Args:
        needs: What the automation declared.
    """

    def __init__(self, needs: BrowserNeeds) -> None:
        self.needs = needs
        self.pool_id = uuid.uuid4().hex[:12]
        self._prefix = f"{MARKER}{self.pool_id}-"
        self._idle: asyncio.Queue[_Browser] = asyncio.Queue()
        self._all: set[_Browser] = set()
        self._engine: BrowserEngine | None = None
        self._started: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False
        self._launch_error: BaseException | None = None
        self._count = 0
        #: Counters since the pool was made (see :meth:`stats`).
        self.launched = 0
        self.retired = 0
        self.crashed = 0
        self.launch_failures = 0
        self.acquired = 0
        self.in_use = 0
        self._launch_seconds: list[float] = []

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
        name = self.needs.engine
        try:
            self._engine = engine_class(name)()
            await self._engine.start(self.needs)
        except BrowserUnavailable as exc:
            self._launch_error = exc
            raise
        except Exception as exc:
            self._launch_error = BrowserUnavailable(
                f"browser engine {name!r} could not start: {type(exc).__name__}: {exc}"
            )
            raise self._launch_error from exc
        results = await asyncio.gather(
            *(self._launch() for _ in range(self.needs.size)), return_exceptions=True
        )
        failures = [r for r in results if isinstance(r, BaseException)]
        if len(failures) == len(results):
            self._launch_error = BrowserUnavailable(
                f"no {name} browser could be launched: {failures[0]}"
            )
            raise self._launch_error

    async def _launch(self) -> None:
        assert self._engine is not None
        self._count += 1
        # fixed width: no browser's marker is a prefix of another's
        marker = f"{self._prefix}{self._count:06d}"
        began = time.monotonic()
        try:
            handle = await asyncio.wait_for(
                self._engine.launch(
                    self.needs, args=[*self.needs.launch_args, marker], marker=marker
                ),
                LAUNCH_TIMEOUT,
            )
        except BaseException:
            self.launch_failures += 1
            kill_pids({p.pid for p in find_processes(marker)})
            raise
        self._launch_seconds.append(time.monotonic() - began)
        del self._launch_seconds[:-100]  # the average is over the last 100 launches
        browser = _Browser(handle, marker)
        browser.pids = {p.pid for p in find_processes(marker)}
        if self._closed:
            await self._retire(browser)
            return
        self._all.add(browser)
        self.launched += 1
        await self._idle.put(browser)

    async def close(self) -> None:
        """Retire every browser, kill what they started and close the engine."""
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
        if self._engine is not None:
            with contextlib.suppress(Exception):
                await self._engine.close()
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
            A Playwright ``Page`` (or the engine's equivalent).

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
        self.acquired += 1
        self.in_use += 1
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
            recorder = current()
            if recorder is not None:
                recorder.page = page  # what ctx.snapshot() and a failure take
            try:
                yield page
            except BaseException as exc:
                # The task failed holding the page: its snapshot, before the context
                # closes (only if the failure's group still wants one).
                if recorder is not None:
                    await recorder.page_failed(page, exc)
                raise
        finally:
            self.in_use -= 1
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
        alive = browser.alive()
        if alive and browser.uses < self.needs.max_uses:
            self._idle.put_nowait(browser)
            return
        if not alive:
            self.crashed += 1
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
    def stats(self) -> dict[str, Any]:
        """The pool at a glance (the worker's stats frame carries it).

        Returns:
            ``engine``, ``size`` and ``max_uses`` (the declaration); ``warm`` (browsers
            running), ``idle`` (those free now), ``in_use`` (pages borrowed now);
            ``acquired``, ``launched``, ``retired``, ``crashed`` (retired because they
            died, disconnected or hung), ``launch_failures`` since the pool was made;
            ``launch_seconds_last`` and ``launch_seconds_avg`` (over the last 100
            launches; None before the first); ``error``: why no browser can be
            launched, or None.
        """
        times = self._launch_seconds
        return {
            "engine": self.needs.engine,
            "size": self.needs.size,
            "max_uses": self.needs.max_uses,
            "warm": len(self._all),
            "idle": self._idle.qsize(),
            "in_use": self.in_use,
            "acquired": self.acquired,
            "launched": self.launched,
            "retired": self.retired,
            "crashed": self.crashed,
            "launch_failures": self.launch_failures,
            "launch_seconds_last": round(times[-1], 3) if times else None,
            "launch_seconds_avg": round(sum(times) / len(times), 3) if times else None,
            "error": None if self._launch_error is None else str(self._launch_error),
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
