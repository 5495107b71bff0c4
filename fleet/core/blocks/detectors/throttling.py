"""Throttling: 429 Too Many Requests, and 503 with ``Retry-After``.

``throttled`` with ``retry_after`` read from ``Retry-After`` (delay-seconds or an
HTTP-date; None when the site did not say). A 503 without ``Retry-After`` is an outage,
not a throttle: None (the task's own error handling sees it). Vendors' 429 challenges
(Kasada) and rate-limit pages (Cloudflare's 1015) are recognized before this detector.
"""

from __future__ import annotations

from fleet.core.blocks.detectors.common import parse_retry_after
from fleet.core.blocks.seen import Seen
from fleet.core.blocks.verdicts import Verdict


def throttling(seen: Seen) -> Verdict | None:
    """429, or 503 with ``Retry-After`` (see the module's docstring)."""
    status = seen.status
    if status != 429 and status != 503:
        return None
    raw = seen.headers.get("retry-after")
    if status == 503 and raw is None:
        return None
    retry = parse_retry_after(raw)
    said = f", Retry-After: {raw}" if raw is not None else ""
    return Verdict("throttled", "generic", f"{status}{said}", retry)
