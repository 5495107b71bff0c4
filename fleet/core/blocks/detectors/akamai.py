"""Akamai (Bot Manager and its edge).

- ``blocked``: Akamai's "Access Denied" page (a 403 from ``server: AkamaiGHost``, or a 403
  with the ``Reference #18.…`` of ``errors.edgesuite.net``), or a 403 that sets Bot
  Manager's cookies (``_abck``, ``bm_sz``, ``ak_bmsc``) with no other vendor's page.
- ``challenge``: the ``sec-cpt`` crypto challenge page (``sec-if-cpt-container``,
  ``/_sec/cp_challenge/``), read on any status when the ``sec_cpt`` cookie is set.

A 2xx with Bot Manager's cookies is an ordinary page (they are set on every page).
"""

from __future__ import annotations

import html
import re
from typing import Final

from fleet.core.blocks.detectors.common import text_of
from fleet.core.blocks.seen import Seen
from fleet.core.blocks.verdicts import Verdict

_COOKIES: Final = ("_abck", "bm_sz", "ak_bmsc")
_CHALLENGE: Final = ("sec-if-cpt-container", "/_sec/cp_challenge/")
#: The reference is written with entities: ``Reference&#32;&#35;18&#46;2f1c…``.
_REFERENCE: Final = re.compile(r"Reference(?:&#32;| )(?:&#35;|#)((?:[0-9a-f]|&#46;|\.)+)")


def akamai(seen: Seen) -> Verdict | None:
    """Akamai's Access Denied and challenge pages (see the module's docstring)."""
    status = seen.status
    if status < 400 and "sec_cpt" not in seen.cookies:
        return None
    text = text_of(seen)
    for marker in _CHALLENGE:
        if marker in text:
            return Verdict("challenge", "akamai", f"Akamai sec-cpt challenge ({marker})")
    if status != 403:  # an edge's 404 is a 404
        return None
    edge = "akamaighost" in seen.headers.get("server", "").lower()
    if edge or "errors&#46;edgesuite&#46;net" in text or "errors.edgesuite.net" in text:
        ref = _REFERENCE.search(text)
        where = f", Reference #{html.unescape(ref.group(1))}" if ref else ""
        source = " from AkamaiGHost" if edge else ""
        return Verdict("blocked", "akamai", f"Akamai Access Denied{source}{where}")
    for cookie in _COOKIES:
        if cookie in seen.cookies:
            return Verdict("blocked", "akamai", f"{status} with the Bot Manager cookie {cookie}")
    return None
