"""Imperva (Incapsula).

Incapsula answers a refused request (often with status 200) with a small page whose
iframe loads ``/_Incapsula_Resource?SWUDNSAI=…`` and reads "Request unsuccessful.
Incapsula incident ID": ``blocked``. A near-empty page that only loads
``/_Incapsula_Resource?SWJIYLWA=…`` (its JavaScript check) is a ``challenge``. Normal
pages of a protected site load that same script after their content, so the script on a
page with content is None. A 403 with Incapsula's header (``x-iinfo``) or cookies
(``visid_incap_…``, ``incap_ses_…``) and no page is ``blocked``. A small page is read
even without those markers (a proxy may drop them); a big one only with them.
"""

from __future__ import annotations

from typing import Final

from fleet.core.blocks.detectors.common import text_of
from fleet.core.blocks.seen import Seen
from fleet.core.blocks.verdicts import Verdict

_COOKIE_PREFIXES: Final = ("visid_incap_", "incap_ses_", "nlbi_")
#: A challenge page is the script and little else.
_BARE: Final = 3 * 1024


def _marked(seen: Seen) -> str | None:
    if "x-iinfo" in seen.headers:
        return "x-iinfo header"
    cdn = seen.headers.get("x-cdn", "").lower()
    if "incapsula" in cdn or "imperva" in cdn:
        return "x-cdn header"
    for cookie in seen.cookies:
        if cookie.startswith(_COOKIE_PREFIXES):
            return f"{cookie} cookie"
    return None


def imperva(seen: Seen) -> Verdict | None:
    """Incapsula's incident and challenge pages (see the module's docstring)."""
    marker = _marked(seen)
    if marker is None and seen.status < 400 and len(seen.body) > _BARE:
        return None  # an incident page is small: a big unmarked page is not read
    text = text_of(seen)
    if "_Incapsula_Resource" in text:
        if "Incapsula incident ID" in text or "SWUDNSAI" in text:
            return Verdict("blocked", "imperva", "Incapsula incident page (Incapsula incident ID)")
        if "CWUDNSAI" in text:
            return Verdict("captcha", "imperva", "Incapsula captcha page (CWUDNSAI)")
        if len(seen.body) <= _BARE:
            return Verdict(
                "challenge", "imperva", "Incapsula JavaScript check (_Incapsula_Resource)"
            )
    if marker is not None and seen.status == 403:
        return Verdict("blocked", "imperva", f"{seen.status} with the {marker}")
    return None
