"""The browser pool behind ``ctx.browser`` (an extra: ``pip install 'fleet-automation[browser]'``).

Imported by the worker only when an automation declares
``Browser = BrowserNeeds(...)``; ``fleet.core`` never imports it. The browsers are
launched by an engine (:mod:`fleet.browser.engines`): a built-in one or a plugin's,
registered in the entry-point group ``fleet.browser_engines``.
"""

from fleet.browser.engines import BrowserEngine, PlaywrightEngine, engine_class, engine_names
from fleet.browser.pool import BrowserPool
from fleet.core.errors import BrowserUnavailable

#: What ``ctx.browser`` is (the spec's name for it).
BrowserResource = BrowserPool

__all__ = [
    "BrowserEngine",
    "BrowserPool",
    "BrowserResource",
    "BrowserUnavailable",
    "PlaywrightEngine",
    "engine_class",
    "engine_names",
]
