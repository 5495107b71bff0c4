"""DataDome: its captcha, device-check and ban pages.

DataDome answers a refused request with 403 and a small page whose ``dd`` object (or the
``geo.captcha-delivery.com`` iframe's query) says what it wants:

- ``'t':'bv'`` (a banned visitor): ``blocked``;
- ``'rt':'i'`` (the interstitial device check): ``challenge``;
- otherwise (``'rt':'c'``, the slider captcha): ``captcha``.

A 403 with DataDome's header (``x-datadome``, ``x-dd-b``) or cookie (``datadome``) and no
such page is ``blocked``. DataDome sets its cookie on every page of a site it protects,
so a 2xx with the cookie is None unless it carries the captcha page.
"""

from __future__ import annotations

import re
from typing import Final

from fleet.core.blocks.detectors.common import text_of
from fleet.core.blocks.seen import Seen
from fleet.core.blocks.verdicts import Verdict

_HOST: Final = "captcha-delivery.com"
#: ``'t':'bv'`` / ``"t":"bv"`` in the dd object, ``&t=bv`` in the iframe's URL.
_FIELD: Final = r"""(?:['"]{name}['"]\s*:\s*['"]|[?&]{name}=)(\w+)"""
_T: Final = re.compile(_FIELD.format(name="t"))
_RT: Final = re.compile(_FIELD.format(name="rt"))


def _marker(seen: Seen) -> str | None:
    for header in ("x-datadome", "x-dd-b"):
        if header in seen.headers:
            return f"{header} header"
    return "datadome cookie" if "datadome" in seen.cookies else None


def datadome(seen: Seen) -> Verdict | None:
    """DataDome's pages and its marked 403 (see the module's docstring)."""
    marker = _marker(seen)
    if marker is None and seen.status < 400:
        return None
    text = text_of(seen)
    at = text.find(_HOST)
    if at >= 0:
        # the dd object and the iframe sit together in a small page: read around the host
        near = text[max(0, at - 2048) : at + 2048]
        t = _T.search(near)
        if t is not None and t.group(1) == "bv":
            return Verdict("blocked", "datadome", "DataDome ban ('t':'bv')")
        rt = _RT.search(near)
        if rt is not None and rt.group(1) == "i":
            return Verdict("challenge", "datadome", "DataDome device check ('rt':'i')")
        return Verdict("captcha", "datadome", f"DataDome captcha ({_HOST})")
    if marker is not None and seen.status == 403:
        return Verdict("blocked", "datadome", f"{seen.status} with the {marker}")
    return None
