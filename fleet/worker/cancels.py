"""Cancel requests for tasks a worker holds but has not started yet.

A ``cancel.<type>`` event can arrive between the backend handing a task out
(its state is ``processing`` from then on, so the master answers a DELETE with
``cancelling`` and publishes the event) and a slot starting ``run_one``. No
slot runs the task yet, so the event would be dropped and the task cancelled
only at its first lease renewal, a third of ``visibility_seconds`` later
(100 s by default). The runner keeps such requests here for a while; a slot
looks before it runs a task.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

#: How long a request waits for its task (the window is a few event-loop turns).
TTL_SECONDS = 60.0
#: Most requests kept (every worker of a type hears every cancel of it).
LIMIT = 10_000


class PendingCancels:
    """Task ids whose cancel came while no slot ran them, each for ``ttl`` seconds.

    Args:
        ttl: Seconds a request is kept.
        limit: Most requests kept (the oldest are dropped first).
        clock: Monotonic time source.
    """

    def __init__(
        self,
        ttl: float = TTL_SECONDS,
        limit: int = LIMIT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl = ttl
        self._limit = limit
        self._clock = clock
        self._until: OrderedDict[str, float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._until)

    def add(self, task_id: str) -> None:
        """Remember a cancel request for ``task_id``."""
        self._prune()
        self._until.pop(task_id, None)
        self._until[task_id] = self._clock() + self._ttl
        while len(self._until) > self._limit:
            self._until.popitem(last=False)

    def take(self, task_id: str) -> bool:
        """True (once) if a live cancel request for ``task_id`` is kept."""
        until = self._until.pop(task_id, None)
        return until is not None and until > self._clock()

    def _prune(self) -> None:
        now = self._clock()
        while self._until:
            task_id, until = next(iter(self._until.items()))
            if until > now:
                break
            del self._until[task_id]
