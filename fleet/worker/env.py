"""The worker's own ``FLEET_*`` seconds settings, read where they are used: a bad
value is logged once per read and the default stands (a worker never stops over one)."""

from __future__ import annotations

import logging
import math
import os

log = logging.getLogger("fleet.worker")


def seconds(name: str, default: float) -> float:
    """``name`` from the environment as seconds >= 0; ``default`` when unset or invalid."""
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value < math.inf:
        log.warning("%s=%r is not a number >= 0; using %g", name, raw, default)
        return default
    return value
