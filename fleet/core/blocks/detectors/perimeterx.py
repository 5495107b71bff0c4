"""PerimeterX (HUMAN): its block page and its API block answer.

PerimeterX refuses with 403 and a page that loads its captcha script (``window._pxAppId``,
``<div id="px-captcha">``, "Press & Hold"). **Press & Hold is a** ``challenge``: it is a
behavioural check a browser gets past by holding a button, not a puzzle to read (the
kinds of :mod:`fleet.core.blocks.verdicts`). The page is a ``captcha`` only when it embeds
a reCAPTCHA or hCaptcha widget (older PerimeterX pages did), with that widget's site key.
A JSON 403 with ``blockScript`` (an API call refused) is a ``challenge`` too; a 403 with
PerimeterX's cookies (``_px3``, ``_pxhd``, ``_pxvid``) and no page is ``blocked``.
"""

from __future__ import annotations

from typing import Final

from fleet.core.blocks.detectors.captchas import find_widget
from fleet.core.blocks.detectors.common import BLOCK_STATUSES
from fleet.core.blocks.seen import Seen
from fleet.core.blocks.verdicts import Verdict

_COOKIES: Final = ("_px3", "_pxhd", "_pxvid", "_px2", "_pxff_cc")
_MARKERS: Final = ("_pxAppId", "px-captcha", "_pxCaptcha", "Press & Hold", "Press &amp; Hold")


def perimeterx(seen: Seen) -> Verdict | None:
    """PerimeterX's block pages on a block status (see the module's docstring)."""
    if seen.status not in BLOCK_STATUSES:
        return None
    body = seen.body
    for marker in _MARKERS:
        if marker in body:
            widget = find_widget(body)
            if widget is not None:
                vendor, sitekey = widget
                return Verdict(
                    "captcha", "perimeterx", f"PerimeterX page with {vendor}", None, sitekey
                )
            return Verdict("challenge", "perimeterx", f"PerimeterX block page ({marker})")
    if "blockScript" in body and '"appId"' in body:
        return Verdict("challenge", "perimeterx", "PerimeterX API block (blockScript)")
    for cookie in _COOKIES if seen.status == 403 else ():
        if cookie in seen.cookies:
            return Verdict("blocked", "perimeterx", f"{seen.status} with the {cookie} cookie")
    return None
