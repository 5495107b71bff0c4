"""reCAPTCHA, hCaptcha and Cloudflare Turnstile widgets.

**The rule.** A widget on a block status (403, 405, 428, 429, 503) is a ``captcha``: the
site answered with a puzzle instead of the page. On any other status a widget is part of
a page (a login form's hCaptcha, a newsletter form's reCAPTCHA) and the page is ``ok``,
unless *the widget is the page*: a small page (at most :data:`SMALL` characters) that
says it is a check ("unusual traffic", "verify you are human", "not a robot"…) and
has nothing else for a person to fill in (no text, e-mail or password input, no
``<textarea>`` but the widget's own response field, no ``<select>``).

The verdict's vendor is the widget's (``recaptcha``, ``hcaptcha``, ``turnstile``) and its
``sitekey`` the widget's ``data-sitekey`` (or the key a ``render`` call or
``api.js?render=`` names), when the page has one.
"""

from __future__ import annotations

import re
from typing import Final

from fleet.core.blocks.detectors.common import BLOCK_STATUSES
from fleet.core.blocks.seen import Seen
from fleet.core.blocks.verdicts import Verdict

#: The largest page that can be "only the widget": a check page is a few kilobytes.
SMALL: Final = 24 * 1024
#: (vendor, markers, the widget element's class), tried in order: hCaptcha's
#: compatibility mode uses reCAPTCHA's class, so hCaptcha's script is looked for first.
_WIDGETS: Final = (
    ("turnstile", ("challenges.cloudflare.com/turnstile", "cf-turnstile"), "cf-turnstile"),
    ("hcaptcha", ("hcaptcha.com/1/api.js", "h-captcha"), "h-captcha"),
    ("recaptcha", ("/recaptcha/api.js", "/recaptcha/enterprise.js", "g-recaptcha"), "g-recaptcha"),
)
_DATA_SITEKEY: Final = re.compile(r"""data-sitekey\s*=\s*["']?([\w.-]+)""")
_JS_SITEKEY: Final = re.compile(r"""\bsitekey['"]?\s*[:=]\s*["']([\w.-]+)""")
_RENDER_KEY: Final = re.compile(
    r"""recaptcha/(?:api|enterprise)\.js\?(?:[^"'>]*&)?render=([\w-]{20,})"""
)
_CHECK_WORDS: Final = (
    "not a robot",
    "you are human",
    "you're human",
    "you are a human",
    "are you a robot",
    "unusual traffic",
    "security check",
    "human verification",
    "verify you are",
    "automated requests",
    "bot check",
)
_INPUT: Final = re.compile(r"<input\b[^>]*>|<textarea\b[^>]*>|<select\b", re.I)
_INPUT_TYPE: Final = re.compile(r"""\btype\s*=\s*["']?(\w+)""", re.I)
#: Input types that are not something for a person to fill in.
_NOT_FIELDS: Final = frozenset(
    {"hidden", "submit", "button", "checkbox", "radio", "image", "reset"}
)


def sitekey(body: str, element_class: str | None = None) -> str | None:
    """The widget's site key: ``data-sitekey`` of the element with ``element_class`` (or of
    any element), else a ``sitekey: '…'`` in a render call, else reCAPTCHA v3's
    ``api.js?render=KEY``; None when the page names none."""
    if element_class is not None:
        at = body.find(element_class)
        while at >= 0:
            start = body.rfind("<", 0, at)
            end = body.find(">", at)
            if start >= 0 and end >= 0:
                found = _DATA_SITEKEY.search(body, start, end)
                if found is not None:
                    return found.group(1)
            at = body.find(element_class, at + len(element_class))
    for pattern in (_DATA_SITEKEY, _JS_SITEKEY, _RENDER_KEY):
        found = pattern.search(body)
        if found is not None:
            return found.group(1)
    return None


def find_widget(body: str) -> tuple[str, str | None] | None:
    """``(vendor, sitekey)`` of the first captcha widget the page carries, or None."""
    for vendor, markers, element_class in _WIDGETS:
        for marker in markers:
            if marker in body:
                return vendor, sitekey(body, element_class)
    return None


def widget_is_the_page(body: str) -> bool:
    """Whether a small page is a check (see the module's docstring): it says so and asks
    a person for nothing but the widget."""
    if len(body) > SMALL:
        return False
    lowered = body.lower()
    if not any(words in lowered for words in _CHECK_WORDS):
        return False
    for tag in _INPUT.finditer(body):
        text = tag.group(0).lower()
        if text.startswith("<select"):
            return False
        if text.startswith("<textarea"):
            if "captcha-response" not in text:  # the widget's own answer field
                return False
            continue
        kind = _INPUT_TYPE.search(text)
        if kind is None or kind.group(1) not in _NOT_FIELDS:
            return False
    return True


def captchas(seen: Seen) -> Verdict | None:
    """A reCAPTCHA, hCaptcha or Turnstile widget that stands for the page (the rule in
    the module's docstring)."""
    body = seen.body
    if seen.status in BLOCK_STATUSES:
        widget = find_widget(body)
        if widget is None:
            return None
        vendor, key = widget
        return Verdict("captcha", vendor, f"{seen.status} with a {vendor} widget", None, key)
    # a cheap gate first: a check page's widget names its site key; a big page is content
    if len(body) > SMALL or "sitekey" not in body:
        return None
    widget = find_widget(body)
    if widget is None or not widget_is_the_page(body):
        return None
    vendor, key = widget
    return Verdict("captcha", vendor, f"a check page with a {vendor} widget", None, key)
