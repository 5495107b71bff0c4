"""The master's payload check for the schedule firer: the catalog's schema of the
type (the one its current workers published), so every type is checked, whichever
plugins this master loaded."""

from __future__ import annotations

import time
from typing import Any

from fleet.backends.base import Backend
from fleet.core.catalog import as_entry
from fleet.core.stored import entry_unreadable
from fleet.master.services.validation import PayloadChecker
from fleet.scheduler.firer import PayloadCheck
from fleet.scheduler.payloads import first_errors

#: How long a type's checker is reused (a new plugin version is seen this late).
CHECKER_TTL_SECONDS = 5.0


def catalog_check(backend: Backend) -> PayloadCheck:
    """A :data:`PayloadCheck` over the catalog, each type's checker kept a few seconds."""
    cache: dict[str, tuple[float, PayloadChecker | None]] = {}

    async def check(automation_type: str, payload: Any) -> str | None:
        hit = cache.get(automation_type)
        if hit is None or hit[0] < time.monotonic():
            entry = await backend.catalog.get(automation_type)
            checker = None
            if entry is not None and entry_unreadable(entry) is None:
                checker = PayloadChecker(automation_type, as_entry(entry))
            hit = cache[automation_type] = (time.monotonic() + CHECKER_TTL_SECONDS, checker)
        if hit[1] is None:
            return None  # no entry to check against: the worker validates
        errors = hit[1].errors(payload, ())
        if not errors:
            return None
        return first_errors([(".".join(str(p) for p in e["loc"]), str(e["msg"])) for e in errors])

    return check
