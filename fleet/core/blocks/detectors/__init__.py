"""The built-in detectors, one module per vendor family, and :data:`BUILT_IN`, the order
the classifier tries them in: vendors' own pages first (their verdict names them), then
captcha widgets (a vendor's page may embed one), then throttling (after Kasada's and
Cloudflare's 429s), then the 403 fallback."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from fleet.core.blocks.detectors.akamai import akamai
from fleet.core.blocks.detectors.captchas import captchas
from fleet.core.blocks.detectors.cloudflare import cloudflare
from fleet.core.blocks.detectors.datadome import datadome
from fleet.core.blocks.detectors.generic import generic
from fleet.core.blocks.detectors.imperva import imperva
from fleet.core.blocks.detectors.kasada import kasada
from fleet.core.blocks.detectors.perimeterx import perimeterx
from fleet.core.blocks.detectors.throttling import throttling
from fleet.core.blocks.seen import Seen
from fleet.core.blocks.verdicts import Verdict

BUILT_IN: Final[tuple[Callable[[Seen], Verdict | None], ...]] = (
    cloudflare,
    datadome,
    perimeterx,
    akamai,
    imperva,
    kasada,
    captchas,
    throttling,
    generic,
)

__all__ = [
    "BUILT_IN",
    "akamai",
    "captchas",
    "cloudflare",
    "datadome",
    "generic",
    "imperva",
    "kasada",
    "perimeterx",
    "throttling",
]
