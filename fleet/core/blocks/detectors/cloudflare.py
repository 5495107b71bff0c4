"""Cloudflare: its challenge pages and its own block pages.

- ``challenge``: the ``cf-mitigated: challenge`` header, or, on a response Cloudflare
  served (``server: cloudflare`` or ``cf-ray``), a challenge page: ``window._cf_chl_opt``
  or the title "Just a moment..." (managed, JavaScript and interactive challenges alike:
  a solver gets past them, whatever widget they show).
- ``throttled``: error 1015 ("You are being rate limited").
- ``blocked``: "Sorry, you have been blocked" (a WAF rule) or an access error code
  (1005-1012, 1020) on a 4xx.

A page Cloudflare merely serves (``cf-ray``, status 200, its ``/cdn-cgi/challenge-platform``
bot-detection script injected into real content) is not Cloudflare's verdict: None.
Another status from Cloudflare with none of these (an origin's 403, a 521) is left to the
other detectors.
"""

from __future__ import annotations

import re
from typing import Final

from fleet.core.blocks.detectors.common import parse_retry_after, text_of
from fleet.core.blocks.seen import Seen
from fleet.core.blocks.verdicts import Verdict

#: Access errors: banned IP, ASN, country, browser signature; a firewall rule.
_ACCESS_ERRORS: Final = frozenset({"1005", "1006", "1007", "1008", "1009", "1010", "1012", "1020"})
#: "Error 1020", "error code: 1020" (a plain-text answer), "Error code 1020",
#: ``<span class="cf-error-code">1015</span>``, "Error reference number: 1020".
_ERROR_CODE: Final = re.compile(
    r"(?:[Ee]rror(?: code| reference number)?:? |cf-error-code\">)(10\d\d)\b"
)


def cloudflare(seen: Seen) -> Verdict | None:
    """Cloudflare's challenge, rate-limit and block pages (see the module's docstring)."""
    headers = seen.headers
    mitigated = headers.get("cf-mitigated")
    if mitigated:
        return Verdict("challenge", "cloudflare", f"cf-mitigated: {mitigated}")
    if "cf-ray" not in headers and headers.get("server", "").lower() != "cloudflare":
        return None
    text = text_of(seen)
    if "_cf_chl_opt" in text:
        return Verdict("challenge", "cloudflare", "a Cloudflare challenge page (_cf_chl_opt)")
    if "<title>Just a moment...</title>" in text:
        return Verdict(
            "challenge", "cloudflare", 'a Cloudflare challenge page ("Just a moment...")'
        )
    if seen.status < 400:
        return None
    if "Sorry, you have been blocked" in text:
        return Verdict("blocked", "cloudflare", 'Cloudflare "Sorry, you have been blocked"')
    code = _ERROR_CODE.search(text)
    if code is None:
        return None
    if code.group(1) == "1015":
        retry = parse_retry_after(headers.get("retry-after"))
        return Verdict("throttled", "cloudflare", "Cloudflare error 1015 (rate limited)", retry)
    if code.group(1) in _ACCESS_ERRORS:
        return Verdict("blocked", "cloudflare", f"Cloudflare error {code.group(1)}")
    return None
