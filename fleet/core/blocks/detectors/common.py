"""What the built-in detectors share: which statuses a block answers with, how much of
a body they read, and the ``Retry-After`` parser."""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime
from typing import Final

from fleet.core.blocks.seen import Seen

#: The statuses a block, a challenge or a throttle answers with (AWS WAF's captcha: 405).
#: A body is read whole (its first 64 KiB) only for these.
BLOCK_STATUSES: Final = frozenset({403, 405, 428, 429, 503})
#: How much of any other page the vendor checks read: an interstitial served with 200
#: carries its markers (the title, the vendor's script) in its first kilobytes, and
#: reading 8 KiB instead of 64 keeps the ordinary page cheap.
HEAD: Final = 8 * 1024


def text_of(seen: Seen) -> str:
    """The part of the body a vendor check reads: all of it for a block status, the
    first :data:`HEAD` characters otherwise."""
    return seen.body if seen.status in BLOCK_STATUSES else seen.body[:HEAD]


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` value asks for: delay-seconds (``"120"``) or an
    HTTP-date (seconds from ``now``, never below 0); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return seconds if seconds >= 0 and seconds == seconds else None  # NaN is not a delay
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP-date is GMT even when it fails to say so
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
