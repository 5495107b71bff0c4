"""The browser pool behind ``ctx.browser`` (an extra: ``pip install 'fleet-automation[browser]'``).

Imported by the worker only when an automation declares
``Browser = BrowserNeeds(...)``; ``fleet.core`` never imports it.
"""

from fleet.browser.pool import BrowserPool
from fleet.core.errors import BrowserUnavailable

#: What ``ctx.browser`` is (the spec's name for it).
BrowserResource = BrowserPool

__all__ = ["BrowserPool", "BrowserResource", "BrowserUnavailable"]
