"""A third-party browser engine, as a plugin package would ship one, and the throw-away
``*.dist-info`` that registers it in the entry-point group ``fleet.browser_engines``.

The tests put that directory on ``sys.path`` (or ``PYTHONPATH`` for a child process),
where ``importlib.metadata`` finds it: nothing depends on what the venv has installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from fleet.browser.engines import GROUP, BrowserEngine
from fleet.core.browser import BrowserNeeds
from tests.browser.stack import CHROMIUM

#: The flag this engine adds to every browser's command line (seen by the tests).
FLAG = "--fleet-test-engine"
#: The distribution the dist-info below stands for.
DIST = "fleet-test-engines"
#: Entry points of that distribution: a working engine, one whose module is missing,
#: and one that is not an engine.
ENTRIES = {
    "fleet-test-engine": "tests.browser.engine_plugin:RecordingEngine",
    "fleet-test-broken": "tests.browser.no_such_engine_module:Engine",
    "fleet-test-notengine": "tests.browser.engine_plugin:NOT_AN_ENGINE",
}
NOT_AN_ENGINE = object()


class RecordingEngine(BrowserEngine):
    """Debian's Chromium through Playwright, recording each launch's arguments."""

    name = "fleet-test-engine"
    requirement = DIST
    launches: ClassVar[list[list[str]]] = []

    def __init__(self) -> None:
        self.playwright: Any = None

    async def start(self, needs: BrowserNeeds) -> None:
        from playwright.async_api import async_playwright

        self.playwright = await async_playwright().start()

    async def launch(self, needs: BrowserNeeds, *, args: list[str], marker: str) -> Any:
        assert args[-1] == marker
        RecordingEngine.launches.append(list(args))
        return await self.playwright.chromium.launch(
            headless=needs.headless,
            args=[FLAG, "--no-sandbox", "--disable-gpu", *args],
            executable_path=CHROMIUM,
        )

    async def close(self) -> None:
        if self.playwright is not None:
            await self.playwright.stop()


def write_dist(root: Path, entries: dict[str, str] | None = None) -> Path:
    """Write ``root/fleet_test_engines-1.0.dist-info`` declaring ``entries``; returns
    ``root`` (the directory to put on ``sys.path``)."""
    info = root / f"{DIST.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST}\nVersion: 1.0\n")
    lines = [f"[{GROUP}]", *(f"{k} = {v}" for k, v in (entries or ENTRIES).items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return root
