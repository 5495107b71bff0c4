"""Kasada: its 429 challenge.

Kasada answers a request it has not verified with 429, a page that loads its ``ips.js``
(``window.KPSDK``), and ``x-kpsdk-*`` headers: a ``challenge`` (a browser running the
script gets past it; it is not a rate limit, so no ``retry_after``). A 2xx carrying
``x-kpsdk-ct`` is a verified request's answer: None.
"""

from __future__ import annotations

from typing import Final

from fleet.core.blocks.detectors.common import BLOCK_STATUSES
from fleet.core.blocks.seen import Seen
from fleet.core.blocks.verdicts import Verdict

_HEADERS: Final = ("x-kpsdk-ct", "x-kpsdk-cd", "x-kpsdk-r", "x-kpsdk-c")


def kasada(seen: Seen) -> Verdict | None:
    """Kasada's challenge on a block status (see the module's docstring)."""
    if seen.status not in BLOCK_STATUSES:  # a verified request's 404 has the headers too
        return None
    for name in _HEADERS:
        if name in seen.headers:
            return Verdict("challenge", "kasada", f"{seen.status} with the {name} header")
    if seen.status == 429 and ("KPSDK" in seen.body or "/ips.js" in seen.body):
        return Verdict("challenge", "kasada", "Kasada challenge page (KPSDK, ips.js)")
    return None
