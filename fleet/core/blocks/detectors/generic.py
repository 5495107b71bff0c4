"""The fallback: a 403 no vendor's detector claimed is ``blocked`` by ``generic``.

Other error statuses (401, 404, 500, a 503 without ``Retry-After``) are errors, not
blocks: None, and the classifier's answer is ``ok`` (the task handles its errors).
"""

from __future__ import annotations

from fleet.core.blocks.seen import Seen
from fleet.core.blocks.verdicts import Verdict

_FORBIDDEN = Verdict("blocked", "generic", "403 Forbidden without a vendor's marker")


def generic(seen: Seen) -> Verdict | None:
    """403 → ``blocked``, vendor ``generic``."""
    return _FORBIDDEN if seen.status == 403 else None
