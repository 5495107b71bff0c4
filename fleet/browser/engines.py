"""Browser engines: what launches the browsers of a :class:`~fleet.browser.BrowserPool`.

An engine is a :class:`BrowserEngine` subclass found by the name an automation gives
in ``BrowserNeeds(engine=...)``:

* built in: ``chromium`` (Playwright's Chromium, else the system's), ``firefox`` and
  ``webkit`` (Playwright's), and ``cloak`` (CloakBrowser's stealth Chromium, the
  ``cloak`` extra);
* from plugins: the entry-point group ``fleet.browser_engines``, each entry
  ``name = "module:Class"``. A built-in name cannot be taken over by a plugin.

Each pool makes its own engine instance: :meth:`BrowserEngine.start` once at warm-up,
:meth:`BrowserEngine.launch` for every browser, :meth:`BrowserEngine.close` when the
pool closes. An engine whose dependencies are not installed fails the warm-up with
:meth:`BrowserEngine.missing`, which names what to ``pip install``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import shutil
import sys
from abc import ABC, abstractmethod
from importlib.metadata import entry_points
from typing import Any, ClassVar

from fleet.core.browser import BrowserNeeds
from fleet.core.errors import BrowserUnavailable

#: Entry-point group of browser engine plugins (value: ``module:Class``).
GROUP = "fleet.browser_engines"
#: Arguments every Chromium of the ``chromium`` engine gets: no sandbox (workers often
#: run as root in containers), no GPU, no background chatter.
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


class BrowserEngine(ABC):
    """Launches the browsers of one pool.

    Subclass it, set :attr:`name` and :attr:`requirement`, implement :meth:`launch`,
    and register the class in the entry-point group ``fleet.browser_engines``.

    Attributes:
        name: The name the engine is registered under (used in messages).
        requirement: What ``pip install`` provides the engine's dependencies.
    """

    name: ClassVar[str] = ""
    requirement: ClassVar[str] = "fleet-automation[browser]"

    async def start(self, needs: BrowserNeeds) -> None:  # noqa: B027 - optional hook
        """Prepare the pool's launches (once, at warm-up): import the engine's
        dependencies, start a driver, fetch a binary.

        Raises:
            BrowserUnavailable: The engine cannot work here (see :meth:`missing`).
        """

    @abstractmethod
    async def launch(self, needs: BrowserNeeds, *, args: list[str], marker: str) -> Any:
        """Launch one browser.

        Args:
            needs: The automation's declaration (``headless``, ``executable_path``...).
            args: Command-line arguments for the browser: ``needs.launch_args``, then
                the pool's ``marker``. They must reach the browser process's command
                line as they are: the pool finds and kills its processes by the marker.
            marker: The marker alone (``--fleet-browser=...``).

        Returns:
            A Playwright-compatible ``Browser``: ``is_connected()``,
            ``await new_context(**options)`` and ``await close()``.
        """

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release what :meth:`start` took (once, when the pool closes)."""

    def missing(self, detail: object = None) -> BrowserUnavailable:
        """The error for an engine whose dependencies are not installed."""
        message = f"browser engine {self.name!r} needs `pip install '{self.requirement}'`"
        return BrowserUnavailable(f"{message} ({detail})" if detail else message)


class PlaywrightEngine(BrowserEngine):
    """An engine Playwright drives: one Playwright driver per pool, whose
    :attr:`browser_type` launches every browser."""

    browser_type: ClassVar[str] = "chromium"
    #: Arguments put before the declaration's own.
    default_args: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        self.playwright: Any = None

    async def start(self, needs: BrowserNeeds) -> None:
        try:
            from playwright.async_api import async_playwright
        except ImportError as exc:
            raise self.missing(exc) from exc
        self.playwright = await async_playwright().start()

    async def launch(self, needs: BrowserNeeds, *, args: list[str], marker: str) -> Any:
        launcher = getattr(self.playwright, self.browser_type)
        return await launcher.launch(
            headless=needs.headless,
            args=[*self.default_args, *args],
            executable_path=self.executable(needs, launcher),
        )

    def executable(self, needs: BrowserNeeds, launcher: Any) -> str | None:
        """The binary to launch (None: Playwright's own)."""
        return needs.executable_path

    async def close(self) -> None:
        playwright, self.playwright = self.playwright, None
        if playwright is not None:
            with contextlib.suppress(Exception):
                await playwright.stop()


class ChromiumEngine(PlaywrightEngine):
    """Playwright's Chromium if it was downloaded (``playwright install chromium``),
    else the system's (``apt-get install chromium``)."""

    name = "chromium"
    default_args = CHROMIUM_ARGS

    def executable(self, needs: BrowserNeeds, launcher: Any) -> str | None:
        if needs.executable_path:
            return needs.executable_path
        with contextlib.suppress(Exception):
            path = str(launcher.executable_path)
            if path and os.path.exists(path):
                return None
        for name in SYSTEM_CHROMIUM:
            found = shutil.which(name)
            if found:
                return found
        return None


class FirefoxEngine(PlaywrightEngine):
    """Playwright's Firefox (``playwright install firefox``)."""

    name = "firefox"
    browser_type = "firefox"


class WebkitEngine(PlaywrightEngine):
    """Playwright's WebKit (``playwright install webkit``)."""

    name = "webkit"
    browser_type = "webkit"


class CloakEngine(BrowserEngine):
    """CloakBrowser: a stealth Chromium behind Playwright's API (the ``cloak`` extra).

    The binary is cloakbrowser's: downloaded into its cache by :meth:`start` the first
    time, or a local build named by ``CLOAKBROWSER_BINARY_PATH`` (the package's own
    override; ``BrowserNeeds.executable_path`` is refused). cloakbrowser adds its
    fingerprint arguments to the declaration's; each browser runs under a Playwright
    driver of its own, stopped by the browser's ``close()``.
    """

    name = "cloak"
    requirement = "fleet-automation[cloak]"

    def __init__(self) -> None:
        self.module: Any = None

    async def start(self, needs: BrowserNeeds) -> None:
        if needs.executable_path:
            raise BrowserUnavailable(
                "browser engine 'cloak' launches cloakbrowser's binary: name a build of "
                "your own with CLOAKBROWSER_BINARY_PATH, not BrowserNeeds.executable_path"
            )
        self.module = import_cloakbrowser(self)
        try:
            await asyncio.to_thread(self.module.ensure_binary)
        except Exception as exc:
            raise BrowserUnavailable(
                f"browser engine 'cloak' has no browser binary ({type(exc).__name__}: {exc}); "
                "cloakbrowser downloads it on first use, or set CLOAKBROWSER_BINARY_PATH "
                "to a local Chromium build"
            ) from exc

    async def launch(self, needs: BrowserNeeds, *, args: list[str], marker: str) -> Any:
        return await self.module.launch_async(headless=needs.headless, args=list(args))


def import_cloakbrowser(engine: BrowserEngine) -> Any:
    """Import ``cloakbrowser``.

    Its humanize layer imports Playwright internals by their old private names
    (``playwright._impl._js_handle``); Playwright releases that dropped the leading
    underscore would make the whole package fail to import. Such a name is aliased to
    the renamed module when only that one exists (Fleet never turns humanize on).

    Raises:
        BrowserUnavailable: cloakbrowser (or Playwright) is not installed, or fails to import.
    """
    for _ in range(16):  # one retry per aliased module
        try:
            return importlib.import_module("cloakbrowser")
        except ModuleNotFoundError as exc:
            if not _alias_renamed(exc.name or ""):
                raise engine.missing(exc) from exc
        except Exception as exc:
            raise engine.missing(
                f"cloakbrowser failed to import: {type(exc).__name__}: {exc}"
            ) from exc
    raise engine.missing("cloakbrowser failed to import")


def _alias_renamed(name: str) -> bool:
    """Make ``playwright._impl._x`` import as ``playwright._impl.x`` if only that exists."""
    prefix = "playwright._impl._"
    if not name.startswith(prefix) or name in sys.modules:
        return False
    try:
        module = importlib.import_module(f"playwright._impl.{name[len(prefix) :]}")
    except ImportError:
        return False
    sys.modules[name] = module
    return True


_BUILTIN: dict[str, type[BrowserEngine]] = {
    "chromium": ChromiumEngine,
    "cloak": CloakEngine,
    "firefox": FirefoxEngine,
    "webkit": WebkitEngine,
}
#: Plugin engines loaded so far, by name.
_loaded: dict[str, type[BrowserEngine]] = {}


def engine_names() -> list[str]:
    """Every engine name known here: the built-in ones and the entry points'."""
    return sorted({*_BUILTIN, *(ep.name for ep in entry_points(group=GROUP))})


def engine_class(name: str) -> type[BrowserEngine]:
    """The engine registered under ``name`` (a plugin's is loaded once, then cached).

    Raises:
        BrowserUnavailable: No engine has that name, or its entry point fails to load
            (the message names the package to install) or is not a ``BrowserEngine``.
    """
    if name in _BUILTIN:
        return _BUILTIN[name]
    if name in _loaded:
        return _loaded[name]
    for ep in entry_points(group=GROUP):
        if ep.name != name:
            continue
        package = ep.dist.name if ep.dist is not None else ep.module.split(".")[0]
        try:
            loaded = ep.load()
        except Exception as exc:
            raise BrowserUnavailable(
                f"browser engine {name!r} needs `pip install '{package}'` (its entry point "
                f"{ep.value} failed to import: {type(exc).__name__}: {exc})"
            ) from exc
        if not (isinstance(loaded, type) and issubclass(loaded, BrowserEngine)):
            raise BrowserUnavailable(
                f"entry point {GROUP}:{name} = {ep.value} of {package!r} is not a "
                "BrowserEngine subclass"
            )
        _loaded[name] = loaded
        return loaded
    raise BrowserUnavailable(
        f"unknown browser engine {name!r}; known here: {', '.join(engine_names())} "
        f"(plugins add engines through the entry-point group {GROUP})"
    )
