"""A short-lived cache of batch types' catalog entries and payload checkers.

Every submit needs its type's catalog entry (404 / 409 / which payload schema)
and a validator built from it. Fetching and decoding the entry, and picking or
building the validator, on every request costs more than the rest of the
master's own work per submit, so the submit routes keep both for
:data:`ENTRY_TTL_SECONDS`.

What that means for callers: a type's entry changed elsewhere (a worker of a
new plugin version re-publishing its schemas, another master deleting the
type) is seen by this master's submits within that time; this master's own
``DELETE /automations/{type}`` forgets the type at once. Only entries that
exist are kept, so a type published a moment ago is accepted at once, and the
catalog itself stays the only state (a master keeps nothing it cannot lose).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from fleet.backends.base import Backend
from fleet.master.services.catalog import require_batch_entry
from fleet.master.services.validation import PayloadChecker

#: How long a batch type's entry and checker are reused by the submit routes.
ENTRY_TTL_SECONDS = 1.0


class EntryCache:
    """Payload checkers of batch types, each reused for ``ttl`` seconds.

    Args:
        ttl: Seconds an entry is reused after it was fetched.
        clock: Monotonic time source.
    """

    def __init__(
        self, ttl: float = ENTRY_TTL_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl = ttl
        self._clock = clock
        self._items: dict[str, tuple[float, PayloadChecker]] = {}

    async def checker(self, backend: Backend, automation_type: str) -> PayloadChecker:
        """The payload checker of a batch type (fetched from the catalog when stale).

        Raises:
            NotFound: 404 for an unknown type, 409 for a type without a task
                queue (never cached: asked again on the next call).
        """
        now = self._clock()
        hit = self._items.get(automation_type)
        if hit is not None and hit[0] > now:
            return hit[1]
        entry = await require_batch_entry(backend, automation_type)
        checker = PayloadChecker(automation_type, entry)
        self._items[automation_type] = (now + self.ttl, checker)
        return checker

    def forget(self, automation_type: str) -> None:
        """Drop a type (its entry was changed or deleted by this master)."""
        self._items.pop(automation_type, None)
